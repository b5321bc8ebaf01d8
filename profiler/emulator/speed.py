"""How much faster or slower than the performance model an emulated engine may run: the bounds
of the emulator's ``speed`` and of the service's SLAPLAN_ONLINE_EMULATOR_SPEED. Beyond a factor of
1000 either way the steps are too long for a test to wait for or too short for the event loop to
time."""

MIN_SPEED = 1e-3  # 1000× slower than the model
MAX_SPEED = 1 / MIN_SPEED  # 1000× faster

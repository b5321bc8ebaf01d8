"""An OpenAI-compatible engine emulator (I/O) whose requests take the times the performance
model predicts: for rehearsing benchmarks and online searches without GPUs."""

"""The profiler: ``model`` (the performance model, pure), ``bench`` (genai-bench runs of
BenchmarkJobs: I/O), ``emulator`` (an OpenAI-compatible engine timed by the model: I/O) and
``hub`` (a model's config.json from a local path or the Hugging Face Hub: I/O)."""

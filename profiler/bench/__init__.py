"""BenchmarkJobs run with genai-bench (I/O): the job's spec, the runner (a subprocess), its
results, the tokenizer fallback, and stand-in measurements the performance model predicts."""

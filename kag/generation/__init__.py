"""Running setups: the configuration and benchmark files, the model providers, one generation, the benchmark runner."""

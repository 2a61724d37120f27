"""golive: go-live acceptance for self-hosted LLM serving stations."""

__version__ = "0.2.0"

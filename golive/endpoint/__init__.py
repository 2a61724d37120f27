"""The served API: the OpenAI client (client), the tool-call battery (toolcalls), long-context prompts (longctx)."""
from golive.endpoint.client import ChatResult, EndpointClient, error_body, metric_total
from golive.endpoint.errors import EndpointError

__all__ = ["ChatResult", "EndpointClient", "EndpointError", "error_body", "metric_total"]

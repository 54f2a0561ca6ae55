"""batchbench: BedsideBench through the OpenAI Batch API, scored like the reference runner."""

from .errors import BatchbenchError
from .summary import summarize

__all__ = ["BatchbenchError", "summarize", "__version__"]
__version__ = "0.1.0"

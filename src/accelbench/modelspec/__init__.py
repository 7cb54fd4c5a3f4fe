"""Model specs: read a model's shape from a config directory, a GGUF file, the Hugging Face cache, a shipped
preset or the hub, and compute its exact parameter counts and KV-cache size.

``load_model_spec(ref)`` is the entry point; see ``accelbench.modelspec.loader`` for the lookup order.
"""

from accelbench.modelspec.hf_config import spec_from_config
from accelbench.modelspec.loader import load_model_spec
from accelbench.modelspec.presets import preset_names

__all__ = ["load_model_spec", "preset_names", "spec_from_config"]

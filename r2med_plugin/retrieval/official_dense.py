"""Split into r2med_plugin.models.official: profiles (data), naming, recipes and loading; the old names
import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.official.profiles", ["PROFILE_FILE", "ENDPOINTS", "EXPANSION_KEEPS_INSTRUCTION", "RetrieverProfile", "profile_source",
        "retriever_profiles", "parse_weights", "default_weights", "towers", "official_dtype"]),
    **same_names("r2med_plugin.models.official.naming", ["RESULT_MARK", "result_name", "profile_of_result", "published_row_of", "on_official_weights"]),
    **same_names("r2med_plugin.models.official.recipes", ["OPENAI_CUT", "VOYAGE_CUT", "TransformerRecipe", "torch_device_type", "pool", "BiEncoderRecipe",
        "InstructorRecipe", "GritRecipe", "NVEmbedRecipe", "EndpointRecipe"]),
    **same_names("r2med_plugin.models.official.loading", ["OfficialEncoder", "load_official_encoder"]),
    "endpoint_host_of": "r2med_plugin.models.embedding_endpoint.endpoint_host",
})

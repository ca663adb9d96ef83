"""What talks to an OpenAI-compatible endpoint, below both the LLM rerankers (llm/) and the embedding endpoint
(models/): the client, its key and host handling, and the extra request-body fields."""

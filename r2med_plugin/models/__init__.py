"""Models: what an encoder and a reranker are (``protocols``), how a name resolves to one (``registry``), what
identifies one (``identity``), and one module per family: ``sentence_transformer``, ``cross_encoder``,
``embedding_endpoint``, ``hashing`` (a stand-in for tests), ``official`` (the official R2MED code's models).
mteb's registry as a family lives in r2med_plugin.integrations.mteb_models (the core never imports mteb).
Nothing is imported here: a family's heavy dependencies load only when one of its models does.
"""

"""The models of the official R2MED code, by short name (``official:<name>``): the dense retrievers' profiles as
data (``profiles``), the result names (``naming``), one torch recipe per official class (``recipes``), an encoder
built from a profile and a recipe (``loading``), the rerankers (``reranker_model``) and the registry's loader (``loader``).
"""

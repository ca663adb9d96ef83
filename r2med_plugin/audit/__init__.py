"""`r2med audit`: is a training set contaminated with R2MED's evaluation data?

text (normalising and shingling) -> minhash (datasketch signatures, LSH) -> index (the evaluation side) ->
matching (training rows against it) -> training (reading training sets) / clean (cleaned copies) -> report ->
run (the whole audit). mteb's declared training data is looked up in r2med_plugin.integrations.mteb_training.
"""

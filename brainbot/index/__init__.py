"""Writing and reading back an index: the indexer, copying between stores, freshness, reading indexed notes back.
"""

"""The index's storage: the store interface and records, what an index must match, opening a --db target, and the two stores.
"""

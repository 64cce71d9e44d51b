"""Retrieval: the searcher (legs, fusion, filters) and re-ranking."""

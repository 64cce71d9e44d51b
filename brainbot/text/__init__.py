"""Text to chunks and terms: the BM25 analyzer and its stemmer, wordpiece counts, atoms, chunking, chunk quality, the paths-to-chunks loop, citable segments.
"""

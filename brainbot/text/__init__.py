"""Text to chunks and terms: the BM25 analyzers (English, and each other language) and the Porter stemmer, wordpiece counts, atoms, chunking, chunk quality, the paths-to-chunks loop, citable segments.
"""

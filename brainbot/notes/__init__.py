"""Notes: finding and reading markdown files, their blocks with exact spans, inline markup, sentences, script and language, and vault facts (links, tags, dates).
"""

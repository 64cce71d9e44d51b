"""Answers: what a question asks for, answers and their citations, the offline answer, the model's tools, the Claude loop.
"""

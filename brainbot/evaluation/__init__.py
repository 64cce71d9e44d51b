"""The evals beside ``brainbot/evaluate.py``: follow-ups within their conversations
(``conversations``) and a manifest of sets, each on its corpus, with its role (``sets``)."""

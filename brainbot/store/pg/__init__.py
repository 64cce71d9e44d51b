"""The PostgreSQL store (pgvector): schema, store, the legs in SQL, the COPY write path, vault tables, export.
"""

"""The models: the MiniLM files, the torch-free ONNX export, the onnxruntime session, the embedder, and the Claude client.
"""

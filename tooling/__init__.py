"""Build-time tooling (not shipped in the runtime wheel): the safetensors-to-GGUF converter
for the test embedding model and a NumPy BERT oracle that checks what it produced."""

"""From OpenAI messages to the model's prompt, and from generated text back to the reply:
chat templates (jinja2, sandboxed), continuation, stop sequences, reasoning blocks."""

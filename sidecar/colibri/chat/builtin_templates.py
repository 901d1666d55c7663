"""Chat templates for model files that carry none, by GGUF architecture.

The Gemma 3 template is Google's own (the instruction-tuned checkpoints'
tokenizer_config.json), kept byte for byte: the default Gemma 3 270M GGUF
has no tokenizer.chat_template, and Gemma's prompts are not interchangeable
with any other family's. DeepSeek's and GLM-5's are in templates_deepseek_glm.py, gpt-oss's
in templates_harmony.py.
"""
from __future__ import annotations

from colibri.chat.templates_deepseek_glm import DEEPSEEK_V31, DEEPSEEK_V32, GLM5
from colibri.chat.templates_harmony import GPT_OSS

GEMMA3 = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)

# Qwen's ChatML, as the Qwen2.5/Qwen3 files spell it, without the tool block
CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

BY_ARCH = {
    "gemma3": GEMMA3,
    "qwen2": CHATML,
    "qwen3": CHATML,
    "qwen3moe": CHATML,
    "deepseek2": DEEPSEEK_V31,  # V3, R1, V3.1 (and Kimi K2, whose files carry their own)
    "deepseek32": DEEPSEEK_V32,
    "glm-dsa": GLM5,
    "gpt-oss": GPT_OSS,  # harmony (chat/harmony.py)
}

# Tokens that open a new turn: a model that writes one has finished its own
# turn without its end-of-turn token, so generation stops there (implicit stop).
# Each family's end-of-turn token is its GGUF's eos/eot (DeepSeek's <｜end▁of▁sentence｜>,
# Kimi's <|im_end|>, GLM's <|user|> and <|observation|>), which the engine stops at.
TURN_OPENERS = ("<start_of_turn>", "<|im_start|>", "<|user|>", "<|observation|>", "<|start_header_id|>",
                "<｜User｜>", "<|im_user|>", "<|im_system|>", "<|im_assistant|>")

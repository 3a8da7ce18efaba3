"""A tiny llama-architecture GGUF model, written by the tests, with weights set by hand.

No weights are downloaded: ``write(path)`` builds a 2-layer, 64-wide llama model with
a byte-level BPE vocabulary (the 256 byte tokens, a few merges, the ChatML control
tokens and the Hermes tool tags) and a Qwen 2.5 style ChatML template that renders
tools, tool calls and tool results, so llama-server's Jinja chat handling, its
tool-call parser and its grammars run for real.

A model of random weights writes noise, and noise makes tests that pass by luck. So
the weights are random only where the text does not matter, and set by hand where it
does. One residual channel is a constant 1; layer 0 has two attention heads that look
for one token each anywhere in the context, ``<tools>`` (the template writes it when
the request has tools) and ``<tool_response>`` (it wraps a tool result), and write
whether they found it into two more channels; every other weight of both layers is
zero, so the residual stream passes through. The output layer reads those channels:

- no tools in the request: printable ASCII noise, never an end token, so a turn ends
  at ``max_tokens`` and its text is valid UTF-8;
- tools, no tool result yet: the ``<tool_call>`` token wins by a wide margin, which
  fires llama-server's lazy tool-call grammar; the grammar then decides every token
  until the call is complete JSON that matches the tool's schema, and the end;
- tools and a tool result: the end token is likely at every step (about a third of
  the mass), so the answer is a little noise and a natural stop.

Only this module imports ``gguf`` and ``numpy``, and only inside ``write``.
"""

import os

#: Residual channels with a meaning (the rest carry per-token noise).
ONE, TOOLS_HERE, RESULT_HERE, SAW_TOOLS, SAW_RESULT, CALL_OPENS, CALL_CLOSES = range(7)
DIM, LAYERS, HEADS, HEAD_DIM, FFN = 64, 2, 4, 16, 128
CONTEXT = 4096

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # control tokens
TAGS = ["<tool_call>", "</tool_call>", "<tools>", "</tools>", "<tool_response>", "</tool_response>"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġ", "a"), ("i", "n"), ("e", "r"), ("o", "n"), ("Ġt", "he")]

CHAT_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a tiny test model.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


def byte_symbols():
    """GPT-2's printable stand-in for each byte, the alphabet of a byte-level BPE vocab."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    symbols = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def vocabulary():
    """(tokens, types, merges, printable) where printable are the ids the noise may use."""
    from gguf import TokenType

    symbols = byte_symbols()
    tokens = list(symbols)
    types = [TokenType.NORMAL] * 256
    printable = [b for b in range(0x20, 0x7F)]
    for left, right in MERGES:
        tokens.append(left + right)
        types.append(TokenType.NORMAL)
        printable.append(len(tokens) - 1)
    tokens += SPECIAL
    types += [TokenType.CONTROL] * len(SPECIAL)
    tokens += TAGS
    types += [TokenType.USER_DEFINED] * len(TAGS)
    return tokens, types, [f"{a} {b}" for a, b in MERGES], printable


def weights(tokens, printable, seed):
    """The tensors, by GGUF name, as float32 arrays shaped (rows, columns)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = len(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    noise = slice(8, DIM)

    embed = np.zeros((vocab, DIM), np.float32)
    embed[:, ONE] = 1.0
    embed[:, noise] = rng.normal(0.0, 0.1, (vocab, DIM - 8))
    embed[ids["<tools>"], TOOLS_HERE] = 1.0
    embed[ids["<tool_response>"], RESULT_HERE] = 1.0
    embed[ids["<tool_call>"], CALL_OPENS] = 1.0
    embed[ids["</tool_call>"], CALL_CLOSES] = 1.0

    # Output rows: a token's logit is (its row) . (the normed residual), and the normed
    # ONE channel is between about 4.5 and 6.5 at every position, so a weight of -3 on
    # it keeps a token out of free text (logit below -13) while noise logits stay
    # within a few units of 0. The grammar can still pick such a token: it masks all
    # others.
    out = np.zeros((vocab, DIM), np.float32)
    out[:, ONE] = -3.0
    out[printable, ONE] = 0.0
    out[printable, noise] = rng.normal(0.0, 0.3, (len(printable), DIM - 8))
    call, close, end = ids["<tool_call>"], ids["</tool_call>"], ids["<|im_end|>"]
    out[call, [ONE, SAW_TOOLS, SAW_RESULT, CALL_OPENS]] = -3.0, 6.0, -6.0, -10.0
    # The call's framing, "<tool_call>\n" (the grammar's trigger) and "</tool_call>"
    # then the end, comes from the model: the grammar allows whitespace there too, and
    # would allow a second call, which the model would otherwise prefer.
    out[ord("\n"), CALL_OPENS] = 10.0  # byte tokens have their byte as id
    out[close, [ONE, SAW_TOOLS, SAW_RESULT]] = -3.0, 5.0, -6.0
    out[end, [ONE, SAW_RESULT, CALL_CLOSES]] = -3.0, 4.35, 10.0

    zeros = {
        "attn_q": (HEADS * HEAD_DIM, DIM), "attn_k": (HEADS * HEAD_DIM, DIM),
        "attn_v": (HEADS * HEAD_DIM, DIM), "attn_output": (DIM, HEADS * HEAD_DIM),
        "ffn_gate": (FFN, DIM), "ffn_up": (FFN, DIM), "ffn_down": (DIM, FFN),
    }
    tensors = {"token_embd.weight": embed, "output_norm.weight": np.ones(DIM, np.float32),
               "output.weight": out}
    for layer in range(LAYERS):
        for name, shape in zeros.items():
            tensors[f"blk.{layer}.{name}.weight"] = np.zeros(shape, np.float32)
        tensors[f"blk.{layer}.attn_norm.weight"] = np.ones(DIM, np.float32)
        tensors[f"blk.{layer}.ffn_norm.weight"] = np.ones(DIM, np.float32)

    # Layer 0, heads 0 and 1: a constant query against a key that is large only at the
    # marker token, so attention lands on the marker wherever it is (a score near 30
    # against 0); its value carries the marker channel into SAW_TOOLS / SAW_RESULT.
    # The last dimension pair of a head rotates slowest under RoPE, and with a
    # frequency base of 1e8 it turns by under a thousandth of a radian across the
    # whole context, so position does not matter.
    blk = "blk.0."
    for head, (here, saw) in enumerate([(TOOLS_HERE, SAW_TOOLS), (RESULT_HERE, SAW_RESULT)]):
        row = head * HEAD_DIM + HEAD_DIM - 2
        tensors[blk + "attn_q.weight"][row, ONE] = 2.0
        tensors[blk + "attn_k.weight"][row, here] = 2.0
        tensors[blk + "attn_v.weight"][head * HEAD_DIM, here] = 1.0
        # The normed marker is about 5 at its token (the noise channels share the
        # norm); this brings it to about 0.9.
        tensors[blk + "attn_output.weight"][saw, head * HEAD_DIM] = 1.0 / 5.7
    return tensors


def write(path, *, seed=0):
    """Write the model to ``path`` (a new file) and return ``path``."""
    import gguf

    tokens, types, merges, printable = vocabulary()
    writer = gguf.GGUFWriter(os.fspath(path), "llama")
    writer.add_name("nacelle tiny test model")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(DIM)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(1e8)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_eot_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, array in weights(tokens, printable, seed).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

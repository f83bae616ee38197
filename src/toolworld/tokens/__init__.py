"""Token handling behind one interface: sampled tokens are kept exactly as sampled, only new messages are tokenized.

- ``buffer``: ``TokenBuffer``, one conversation's ids, loss mask and logprobs (a shared record);
- ``tokenizers``: ``load_tokenizer``, the one loader (a loaded tokenizer, a folder, or a ``.gguf`` file);
- ``template``: ``ChatTemplate``, what a family's chat template does, learned from probe renders;
- ``bridge``: ``TitoConversation``, which grows a buffer turn by turn with token deltas (its docstring has the rule);
- ``dialects``: how tool calls are written for templates without tool support, and read back from sampled text;
- ``audit``: a template's bridge checked against full renders, for ``toolworld tokens audit``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bridge import TitoConversation
    from .buffer import TokenBuffer
    from .dialects import FORMATS, ParseResult, parse_tool_calls, tool_call_text, tool_system_prompt
    from .template import SENTINEL, ChatTemplate, Delta, lcp
    from .tokenizers import TemplateError, load_tokenizer

#: Where each public name lives. Loaded on first use, so that a module needing one job (the environment reads
#: tool-call dialects, the records read the buffer) does not import the template and bridge machinery with it.
_HOMES = {"TitoConversation": "bridge", "TokenBuffer": "buffer", "FORMATS": "dialects", "ParseResult": "dialects",
          "parse_tool_calls": "dialects", "tool_call_text": "dialects", "tool_system_prompt": "dialects",
          "SENTINEL": "template", "ChatTemplate": "template", "Delta": "template", "lcp": "template",
          "TemplateError": "tokenizers", "load_tokenizer": "tokenizers"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'toolworld.tokens' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["FORMATS", "SENTINEL", "ChatTemplate", "Delta", "ParseResult", "TemplateError", "TitoConversation",
           "TokenBuffer", "lcp", "load_tokenizer", "parse_tool_calls", "tool_call_text", "tool_system_prompt"]

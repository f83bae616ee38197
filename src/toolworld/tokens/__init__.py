"""Token handling behind one interface: sampled tokens are kept exactly as sampled, only new messages are tokenized.

- ``buffer``: ``TokenBuffer``, one conversation's ids, loss mask and logprobs (a shared record);
- ``tokenizers``: ``load_tokenizer``, the one loader (a loaded tokenizer, a folder, or a ``.gguf`` file);
- ``template``: ``ChatTemplate``, what a family's chat template does, learned from probe renders;
- ``bridge``: ``TitoConversation``, which grows a buffer turn by turn with token deltas (its docstring has the rule);
- ``dialects``: how tool calls are written for templates without tool support, and read back from sampled text;
- ``audit``: a template's bridge checked against full renders, for ``toolworld tokens audit``.
"""

from .bridge import TitoConversation
from .buffer import TokenBuffer
from .dialects import FORMATS, ParseResult, parse_tool_calls, tool_call_text, tool_system_prompt
from .template import SENTINEL, ChatTemplate, Delta, lcp
from .tokenizers import TemplateError, load_tokenizer

__all__ = ["FORMATS", "SENTINEL", "ChatTemplate", "Delta", "ParseResult", "TemplateError", "TitoConversation",
           "TokenBuffer", "lcp", "load_tokenizer", "parse_tool_calls", "tool_call_text", "tool_system_prompt"]

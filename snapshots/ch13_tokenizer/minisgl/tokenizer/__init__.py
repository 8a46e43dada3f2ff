"""tokenizer 进程：分词（TokenizeManager）、增量反分词（DetokenizeManager）和进程入口 tokenize_worker。"""

from .detokenize import DetokenizeManager, DetokenizeOutput, IncrementalDecoder
from .server import TokenizerHandler, tokenize_worker
from .tokenize import TokenizeManager

__all__ = ["TokenizeManager", "DetokenizeManager", "DetokenizeOutput", "IncrementalDecoder",
           "TokenizerHandler", "tokenize_worker"]

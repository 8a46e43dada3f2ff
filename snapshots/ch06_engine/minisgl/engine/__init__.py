"""Engine：一次前向加采样。调度器在它之上决定每一步算哪些请求、它们的 K/V 放在哪里。"""

from .config import EngineConfig
from .engine import Engine, ForwardOutput
from .sample import BatchLogprobs, BatchSamplingArgs, Sampler, TokenLogprobs, logprobs_per_req

__all__ = ["BatchLogprobs", "BatchSamplingArgs", "Engine", "EngineConfig", "ForwardOutput", "Sampler",
           "TokenLogprobs", "logprobs_per_req"]

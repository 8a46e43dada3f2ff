// 张量并行逐步演示（第 16 章）：一次前向经过词表并行的嵌入层、一个 decoder 层、lm_head，
// 每一步显示每个 rank 持有哪一段权重（真实的形状）、激活是完整 / 部分和 / 分片，以及在哪里通信。
//
// 页面里放一个容器就会挂上（docs/assets/tp-stepper.snippet.html）：
//   <div class="tp-stepper" data-config='{"model": "Qwen3-0.6B", "hidden_size": 1024, ...}'></div>
// data-config 的键与 Hugging Face 的 config.json 相同；所有形状都由下面的 plan() 从这些数算出来，
// 不按 TP 手写。页面上没有这样的容器时，这个脚本什么也不做。
(function () {
  "use strict";

  // data-config 里没写的键取这些值（Qwen3-0.6B 的 config.json）
  var DEFAULTS = {
    model: "Qwen3-0.6B",
    model_type: "qwen3",
    hidden_size: 1024,
    intermediate_size: 3072,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    vocab_size: 151936,
    num_hidden_layers: 28,
    tie_word_embeddings: true,
    tp: [1, 2, 4, 16],   // 可选的 TP
    tp_default: 2,
    tokens: 8,           // 批里的 token 数 N（只用于算通信量）
    dtype: "bf16"
  };
  var DTYPES = { bf16: 2, float32: 4 };
  var PLAY_MS = 2200;

  // ------------------------------------------------------------------ 小工具

  function h(tag, attrs, children) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k === "style") el.setAttribute("style", v);
        else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? "" : String(v));
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return el;
  }

  // `反引号` 里的字排成代码；其余是纯文本（不用 innerHTML）
  function rich(tag, cls, text) {
    var el = h(tag, { class: cls });
    String(text).split("`").forEach(function (part, i) {
      if (!part) return;
      el.appendChild(i % 2 ? h("code", { text: part }) : document.createTextNode(part));
    });
    return el;
  }

  function range(a, b) { // "0–7"，只有一个时 "5"
    return b - a <= 1 ? String(a) : a + "–" + (b - 1);
  }

  function joinList(xs) { return xs.join("、"); }

  function bytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    var s = i === 0 ? String(Math.round(n)) : (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
    return s.replace(/\.0+$/, "").replace(/(\.\d*?)0+$/, "$1") + " " + units[i];
  }

  function shape(dims) { return dims.join(" × "); }
  function tshape(dims) { return "[" + dims.join(", ") + "]"; }

  // ------------------------------------------------------------------ 切分：全部形状从这里算出

  // 这个 TP 不能整除时返回原因（按钮因此不可选），能切时返回 null
  function tpProblem(cfg, tp) {
    if (tp < 1 || Math.floor(tp) !== tp) return "TP 必须是正整数";
    if (cfg.num_attention_heads % tp) return cfg.num_attention_heads + " 个 q 头不能平分给 " + tp + " 个 rank";
    var kv = cfg.num_key_value_heads;
    if (kv >= tp ? kv % tp : tp % kv) return kv + " 个 KV 头既不能平分给 " + tp + " 个 rank，也不能整份复制";
    if (cfg.intermediate_size % tp) return "中间维 " + cfg.intermediate_size + " 不能平分给 " + tp + " 个 rank";
    return null;
  }

  function plan(cfg, tp) {
    var H = cfg.hidden_size, I = cfg.intermediate_size, nq = cfg.num_attention_heads,
      nkv = cfg.num_key_value_heads, hd = cfg.head_dim, V = cfg.vocab_size;
    var lq = nq / tp, lkv = nkv >= tp ? nkv / tp : 1, li = I / tp, vper = Math.ceil(V / tp);
    var ranks = [];
    for (var r = 0; r < tp; r++) {
      var kv0 = nkv >= tp ? r * lkv : Math.floor(r * nkv / tp); // 与 shard_tensor 一样：head = rank * kv // size
      ranks.push({
        rank: r,
        q: [r * lq, (r + 1) * lq],
        kv: [kv0, kv0 + lkv],
        inter: [r * li, (r + 1) * li],
        vocab: [Math.min(r * vper, V), Math.min((r + 1) * vper, V)]
      });
    }
    ranks.forEach(function (a) { // KV 头复制时，谁和谁共用同一个 KV 头
      a.sharesWith = ranks.filter(function (b) { return b !== a && b.kv[0] === a.kv[0] && nkv < tp; })
        .map(function (b) { return b.rank; });
    });
    return {
      tp: tp, H: H, I: I, nq: nq, nkv: nkv, hd: hd, V: V, L: cfg.num_hidden_layers,
      lq: lq, lkv: lkv, li: li, vper: vper, pad: vper * tp - V,
      replicas: nkv >= tp ? 1 : tp / nkv, group: nq / nkv,
      qkvRows: (lq + 2 * lkv) * hd, qkvFull: (nq + 2 * nkv) * hd,
      ranks: ranks
    };
  }

  // ------------------------------------------------------------------ 条形图：一个维度上各段的占有情况
  //
  // 一根条代表完整张量（或完整权重）被切的那一维；segs 是并排的几块（q | k | v，gate | up），
  // 每块有相对宽度 w、名字、刻度数（头的分界）和本 rank 占的区间 [a, b)（以块内单位计）。

  function seg(w, units, parts, name, ticks) {
    return { w: w, units: units, parts: parts, name: name || "", ticks: ticks || 0 };
  }

  // scale = true：画在列标题里的那根「全尺寸」条，不上色，只标出各块的名字
  function barEl(kind, segs, scale) {
    var el = h("div", { class: "tps-bar" + (scale ? " tps-scale" : ""), "aria-hidden": "true" });
    segs.forEach(function (s) {
      var box = h("div", { class: "tps-seg", style: "flex-grow:" + s.w });
      if (!scale) s.parts.forEach(function (p) {
        var left = 100 * p[0] / s.units, width = 100 * (p[1] - p[0]) / s.units;
        box.appendChild(h("div", { class: "tps-fill tps-" + kind, style: "left:" + left + "%;width:" + width + "%" }));
      });
      if (s.ticks > 1 && s.ticks <= 64) {
        box.appendChild(h("div", { class: "tps-ticks", style: "background-size:" + (100 / s.ticks) + "% 100%" }));
      }
      if (scale && s.name) box.appendChild(h("span", { class: "tps-seg-name", text: s.name }));
      el.appendChild(box);
    });
    return el;
  }

  var STATE_NAMES = { full: "完整", partial: "部分和", shard: "分片" };

  // ------------------------------------------------------------------ 步骤
  //
  // 每一步：scope（pre = 嵌入，layer = 每层一次，post = 最后一层之后），comm（null / "all-reduce" / "all-gather"），
  // left / right 两栏：每个 rank 一格 {kind, segs, shape, detail}。TP=1 时部分和、分片都等于完整。

  function steps(cfg, P) {
    var tp = P.tp, one = tp === 1, H = P.H, N = "N";
    var st = function (s) { return one ? "full" : s; };
    var all = function (n) { return [[0, n]]; };
    var qsegs = function (a) { // q | k | v，a 是某个 rank（null = 全部）
      var q = a ? [a.q] : all(P.nq), kv = a ? [a.kv] : all(P.nkv);
      return [seg(P.nq, P.nq, q, "q", P.nq), seg(P.nkv, P.nkv, kv, "k", P.nkv), seg(P.nkv, P.nkv, kv, "v", P.nkv)];
    };
    var heads = function (a) {
      var s = "q 头 " + range(a.q[0], a.q[1]) + " · KV 头 " + range(a.kv[0], a.kv[1]);
      if (a.sharesWith.length) s += "（与 rank " + joinList(a.sharesWith) + " 共用）";
      return s;
    };
    var vocabRows = function (a) {
      return "词表第 " + range(a.vocab[0], a.vocab[1]) + " 行" +
        (a.vocab[1] - a.vocab[0] < P.vper ? "（另补 " + (P.vper - (a.vocab[1] - a.vocab[0])) + " 行 0）" : "");
    };
    var fullAct = function (dim, detail) {
      return function () { return { kind: "full", segs: [seg(1, 1, all(1))], shape: tshape([N, dim]), detail: detail || "" }; };
    };
    var partialAct = function (dim, detail) {
      return function () { return { kind: st("partial"), segs: [seg(1, 1, all(1))], shape: tshape([N, dim]), detail: detail || "" }; };
    };
    var normWeight = function (name) {
      return function () { return { kind: "weight", segs: [seg(1, 1, all(1))], shape: tshape([H]), detail: name + "，每个 rank 一份完整的" }; };
    };
    var skip = one ? "TP=1：只有一个 rank，这一步什么也不做（tp_size 为 1 时不调用通信）。" : "";
    var qk = cfg.model_type === "qwen3"
      ? "Qwen3 先对每个头的 q、k 做 RMSNorm（`q_norm`、`k_norm`，权重 [" + P.hd + "]，复制），再做 RoPE、写 KV 池、算注意力。"
      : "q、k 做 RoPE，写 KV 池，算注意力。";
    var firsts = P.ranks.filter(function (a) { return !a.sharesWith.length || a.sharesWith[0] > a.rank; });
    var kvNote = P.replicas > 1
      ? P.nkv + " 个 KV 头、" + tp + " 个 rank：每个 KV 头复制到 " + P.replicas + " 个 rank——" +
        firsts.slice(0, 3).map(function (a) {
          return "KV 头 " + a.kv[0] + " → rank " + joinList([a.rank].concat(a.sharesWith));
        }).join("；") + (firsts.length > 3 ? "……" : "；") + "各存一份副本。"
      : "";
    var lm = cfg.tie_word_embeddings ? "与嵌入层共用同一份权重（tie_word_embeddings）" : "lm_head 有自己的权重，切法与嵌入层相同";

    var table = [
      {
        id: "embed", scope: "pre", chip: "embed_tokens", title: "词表并行的嵌入层（embed_tokens）",
        text: one ? "TP=1：一个 rank 存整个词表，直接查表。"
          : "每个 rank 只存词表里连续的一段行（" + P.vper + " 行）。查表时不在本段的 token 输出全 0，所以每个 rank 得到的是形状完整的部分和：每个 token 的向量只在一个 rank 上非零。" +
            (P.pad ? "词表不能整除时最后一个 rank 补 " + P.pad + " 行 0。" : ""),
        full: "完整权重 " + shape([P.V, H]), leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: function (a) { return { kind: "weight", segs: [seg(P.V, P.V, [a.vocab])], shape: shape([P.vper, H]), detail: vocabRows(a) }; },
        right: partialAct(H, one ? "" : "本段以外的 token 是 0")
      },
      {
        id: "ar0", scope: "pre", comm: "all-reduce", chip: "all-reduce", commDim: H, title: "all-reduce：把嵌入加起来",
        text: skip || "各 rank 的 [N, " + H + "] 逐元素相加：0 + 向量 = 向量，每个 rank 都拿到完整的嵌入。这是一次前向里的第 1 次 all-reduce，不属于任何一层。",
        leftTitle: "输入", rightTitle: "输出",
        left: partialAct(H), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "ln1", scope: "layer", chip: "input_layernorm", title: "RMSNorm（input_layernorm）：复制，不切",
        text: "norm 的权重只有 [" + H + "]，每个 rank 存一份完整的。输入完整、权重完整，各 rank 算出一样的结果，不需要通信。",
        full: "完整权重 " + shape([H]), leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: normWeight("input_layernorm"), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "qkv", scope: "layer", chip: "qkv_proj", title: "qkv_proj：列并行，按头切",
        text: "q、k、v 三块先各自按头切，再在每个 rank 上拼成一块（rank 0：" + heads(P.ranks[0]).replace(/（.*）/, "") + "）。" +
          (one ? "" : "把合并后的 " + P.qkvFull + " 行直接按行切成 " + tp + " 段是错的：各 rank 拿到的不再是配套的 q、k、v 头。") + kvNote,
        full: "完整权重 (" + P.nq + " + 2·" + P.nkv + ")·" + P.hd + " = " + shape([P.qkvFull, H]),
        leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: function (a) {
          return { kind: "weight", segs: qsegs(a), shape: shape([P.qkvRows, H]), formula: "(" + P.lq + " + 2·" + P.lkv + ")·" + P.hd + " = ", detail: heads(a) };
        },
        right: function (a) { return { kind: st("shard"), segs: qsegs(a), shape: tshape([N, P.qkvRows]), detail: "" }; }
      },
      {
        id: "attn", scope: "layer", chip: "注意力", title: "注意力：每个 rank 只算自己的头，不通信",
        text: qk + "GQA 里 q 头 " + range(0, P.group) + " 共用 KV 头 0，依此类推；切分让本 rank 的 q 头用到的 KV 头都在本 rank，所以头与头之间不交换任何数据。" + kvNote,
        leftTitle: "本 rank 的 KV 池（每层）", rightTitle: "输出",
        left: function (a) {
          return { kind: "weight", segs: [seg(P.nkv, P.nkv, [a.kv], "KV", P.nkv)], shape: "k、v 各 " + tshape(["槽位", P.lkv, P.hd]),
            detail: "KV 头 " + range(a.kv[0], a.kv[1]) + (a.sharesWith.length ? "（与 rank " + joinList(a.sharesWith) + " 共用）" : "") };
        },
        right: function (a) {
          return { kind: st("shard"), segs: [seg(P.nq, P.nq, [a.q], "q 头", P.nq)], shape: tshape([N, P.lq * P.hd]), detail: "q 头 " + range(a.q[0], a.q[1]) + " 的输出" };
        }
      },
      {
        id: "o", scope: "layer", chip: "o_proj", title: "o_proj：行并行，得到部分和",
        text: "o_proj 按输入维切：rank 只有自己那 " + P.lq + " 个头的输出（" + P.lq * P.hd + " 维），乘上权重里对应的 " + P.lq * P.hd +
          " 列，得到形状完整的 [N, " + H + "]——但只是部分和。",
        full: "完整权重 " + shape([H, P.nq * P.hd]), leftTitle: "本 rank 的权重（按输入维切）", rightTitle: "输出",
        left: function (a) { return { kind: "weight", segs: [seg(P.nq, P.nq, [a.q], "输入维", P.nq)], shape: shape([H, P.lq * P.hd]), detail: "q 头 " + range(a.q[0], a.q[1]) + " 对应的列" }; },
        right: partialAct(H, one ? "" : "要与其他 rank 相加")
      },
      {
        id: "ar1", scope: "layer", comm: "all-reduce", chip: "all-reduce", commDim: H, title: "all-reduce #1：注意力之后",
        text: skip || "把各 rank 的部分和相加，得到真正的注意力输出。`LinearRowParallel.forward` 乘完权重立刻调用 `all_reduce`。",
        leftTitle: "输入", rightTitle: "输出", left: partialAct(H), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "ln2", scope: "layer", chip: "残差 + norm", title: "残差 + RMSNorm（post_attention_layernorm）",
        text: "残差是完整的、各 rank 相同，相加在本地做；norm 的权重复制，不需要通信。",
        full: "完整权重 " + shape([H]), leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: normWeight("post_attention_layernorm"), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "gu", scope: "layer", chip: "gate_up_proj", title: "gate_up_proj：列并行，按中间维切",
        text: "gate 和 up 各按中间维切成 " + tp + " 段，再在每个 rank 上拼起来：本 rank 的 " + P.li + " 个 gate 通道和编号相同的 " + P.li + " 个 up 通道在一起。",
        full: "完整权重 2·" + P.I + " = " + shape([2 * P.I, H]), leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: function (a) {
          return { kind: "weight", segs: [seg(1, P.I, [a.inter], "gate"), seg(1, P.I, [a.inter], "up")],
            shape: shape([2 * P.li, H]), formula: "2·" + P.li + " = ", detail: "gate、up 的第 " + range(a.inter[0], a.inter[1]) + " 个通道" };
        },
        right: function (a) {
          return { kind: st("shard"), segs: [seg(1, P.I, [a.inter], "gate"), seg(1, P.I, [a.inter], "up")], shape: tshape([N, 2 * P.li]), detail: "" };
        }
      },
      {
        id: "act", scope: "layer", chip: "SiLU × up", title: "SiLU(gate) × up：逐元素，不通信",
        text: "第 j 个输出只用第 j 个 gate 和第 j 个 up，两个都在同一个 rank 上，所以不需要别的 rank 的数据。",
        leftTitle: "输入", rightTitle: "输出",
        left: function (a) { return { kind: st("shard"), segs: [seg(1, P.I, [a.inter], "gate"), seg(1, P.I, [a.inter], "up")], shape: tshape([N, 2 * P.li]), detail: "" }; },
        right: function (a) { return { kind: st("shard"), segs: [seg(1, P.I, [a.inter], "中间维")], shape: tshape([N, P.li]), detail: "通道 " + range(a.inter[0], a.inter[1]) }; }
      },
      {
        id: "down", scope: "layer", chip: "down_proj", title: "down_proj：行并行，得到部分和",
        text: "按输入维（中间维）切：每个 rank 用自己那 " + P.li + " 维乘权重里对应的 " + P.li + " 列，得到 [N, " + H + "] 的部分和。",
        full: "完整权重 " + shape([H, P.I]), leftTitle: "本 rank 的权重（按输入维切）", rightTitle: "输出",
        left: function (a) { return { kind: "weight", segs: [seg(1, P.I, [a.inter], "输入维")], shape: shape([H, P.li]), detail: "通道 " + range(a.inter[0], a.inter[1]) + " 对应的列" }; },
        right: partialAct(H, one ? "" : "要与其他 rank 相加")
      },
      {
        id: "ar2", scope: "layer", comm: "all-reduce", chip: "all-reduce", commDim: H, title: "all-reduce #2：MLP 之后",
        text: skip || "相加之后每个 rank 都有完整的层输出，加上残差，进入下一层。一层到此结束：2 次 all-reduce，其余全是本地计算。",
        leftTitle: "输入", rightTitle: "输出", left: partialAct(H), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "layers", scope: "stack", chip: "×" + P.L + " 层", title: "其余 " + (P.L - 1) + " 层：重复第 {layer} 步",
        text: "每一层都是同样的切法、同样的 2 次 all-reduce。下面每个圆点是一次 all-reduce，方块是 lm_head 的 all-gather。" +
          (one ? "TP=1 时这些通信都不发生。" : "")
      },
      {
        id: "norm", scope: "post", chip: "norm", title: "最后的 RMSNorm（norm）：复制",
        text: "和层里的 norm 一样：权重 [" + H + "] 每个 rank 一份，输入完整，不通信。",
        full: "完整权重 " + shape([H]), leftTitle: "本 rank 的权重", rightTitle: "输出",
        left: normWeight("norm"), right: fullAct(H, "各 rank 相同")
      },
      {
        id: "lm", scope: "post", chip: "lm_head", title: "lm_head：词表并行，每个 rank 算一段 logits",
        text: lm + "：每个 rank 用自己那 " + P.vper + " 行，算出自己那段词表的 logits，转成 float32。prefill 时只取每个请求最后一个 token 那一行；这里按 decode 算，N 行都要。",
        full: "完整权重 " + shape([P.V, H]), leftTitle: "本 rank 的权重", rightTitle: "输出（logits）",
        left: function (a) { return { kind: "weight", segs: [seg(P.V, P.V, [a.vocab])], shape: shape([P.vper, H]), detail: vocabRows(a) }; },
        right: function (a) { return { kind: st("shard"), segs: [seg(P.V, P.V, [a.vocab])], shape: tshape([N, P.vper]), detail: "词表第 " + range(a.vocab[0], a.vocab[1]) + " 个 token 的 logits" }; }
      },
      {
        id: "ag", scope: "post", comm: "all-gather", chip: "all-gather", commDim: P.V, title: "all-gather：拼接，不是相加",
        text: skip || "采样要整个词表上的分布：把各 rank 的那段 logits 按 rank 顺序拼起来，得到 [N, " + P.V + "]。嵌入层是相加（每个 token 只在一个 rank 上非零），这里是拼接（每段来自不同的 rank）。",
        leftTitle: "输入", rightTitle: "输出",
        left: function (a) { return { kind: st("shard"), segs: [seg(P.V, P.V, [a.vocab])], shape: tshape([N, P.vper]), detail: "" }; },
        right: fullAct(P.V, "float32，各 rank 相同")
      },
      {
        id: "sample", scope: "post", chip: "采样", title: "采样：每个 rank 得到同样的 token",
        text: "每个 rank 都有同样的完整 logits，采样器用同样的种子，得到同样的下一个 token；只有 rank 0 把结果发回 tokenizer 进程（第 14 章）。",
        leftTitle: "输入", rightTitle: "输出",
        left: fullAct(P.V, "logits"),
        right: function () { return { kind: "full", segs: [seg(1, 1, all(1))], shape: tshape([N]), detail: "下一个 token 的 id" }; }
      }
    ];
    // 「重复第 a–b 步」：一层的第一步和最后一步的编号，从表里数
    var inLayer = [];
    table.forEach(function (s, i) { if (s.scope === "layer") inLayer.push(i + 1); });
    table.forEach(function (s) { s.title = s.title.replace("{layer}", inLayer[0] + "–" + inLayer[inLayer.length - 1]); });
    return table;
  }

  // 一次前向的通信次数：嵌入 + 每层 × 层数 + lm_head，全部从步骤表里数出来
  function counts(list, L) {
    var c = { layerAR: 0, totalAR: 0, totalAG: 0 };
    list.forEach(function (s) {
      if (!s.comm) return;
      var times = s.scope === "layer" ? L : 1;
      if (s.scope === "layer" && s.comm === "all-reduce") c.layerAR += 1;
      if (s.comm === "all-reduce") c.totalAR += times; else c.totalAG += times;
    });
    return c;
  }

  // 到第 i 步为止（含）发生了几次通信；「×L 层」那一步把其余各层也算上
  function countsUpTo(list, i, L) {
    var ar = 0, ag = 0, layerAR = 0;
    list.forEach(function (s, k) {
      if (s.scope === "layer" && s.comm === "all-reduce") layerAR++;
      if (k > i || !s.comm) return;
      if (s.comm === "all-reduce") ar++; else ag++;
    });
    var stack = list.map(function (s) { return s.scope; }).indexOf("stack");
    if (stack >= 0 && i >= stack) ar += (L - 1) * layerAR;
    return { ar: ar, ag: ag };
  }

  // ------------------------------------------------------------------ 挂载

  function readConfig(el) {
    var cfg = {}, k;
    for (k in DEFAULTS) cfg[k] = DEFAULTS[k];
    var raw = el.getAttribute("data-config");
    if (raw) {
      var given = JSON.parse(raw);
      for (k in given) cfg[k] = given[k];
    }
    return cfg;
  }

  function mount(root) {
    root.setAttribute("data-tp-mounted", "");
    var cfg;
    try {
      cfg = readConfig(root);
    } catch (e) {
      root.textContent = "张量并行演示：data-config 不是合法的 JSON（" + e.message + "）";
      return;
    }
    var tps = cfg.tp.slice();
    var state = {
      step: 0,
      tp: tps.indexOf(cfg.tp_default) >= 0 && !tpProblem(cfg, cfg.tp_default) ? cfg.tp_default : 1,
      tokens: cfg.tokens, dtype: DTYPES[cfg.dtype] ? cfg.dtype : "bf16", timer: null
    };

    root.textContent = "";
    root.setAttribute("tabindex", "0");
    root.setAttribute("role", "group");
    root.setAttribute("aria-roledescription", "逐步演示");
    root.setAttribute("aria-label", "张量并行逐步演示：" + cfg.model + " 一次前向。左右方向键换步，Home / End 到头尾，数字键 1–" + tps.length + " 或 T 换 TP");

    // 顶部：标题、TP、N、dtype
    var tpButtons = tps.map(function (tp, k) {
      var why = tpProblem(cfg, tp);
      return h("button", {
        type: "button", class: "tps-tp", "data-tp": tp, "aria-pressed": "false", disabled: why ? true : null,
        title: why || ("TP=" + tp + "（数字键 " + (k + 1) + "）"), "aria-label": "TP=" + tp + (why ? "（" + why + "）" : ""),
        text: String(tp), onclick: function () { setTp(tp); }
      });
    });
    var tokensInput = h("input", { type: "number", class: "tps-tokens", min: 1, max: 1048576, value: state.tokens, "aria-label": "批里的 token 数 N" });
    var dtypeSelect = h("select", { class: "tps-dtype", "aria-label": "激活的数据类型" },
      Object.keys(DTYPES).map(function (d) { return h("option", { value: d, text: d, selected: d === state.dtype ? true : null }); }));
    tokensInput.addEventListener("input", function () {
      var v = Math.floor(Number(tokensInput.value));
      if (v >= 1) { state.tokens = v; render(); }
    });
    dtypeSelect.addEventListener("change", function () { state.dtype = dtypeSelect.value; render(); });

    var head = h("div", { class: "tps-head" }, [
      h("div", { class: "tps-title", text: "张量并行逐步演示 · " + cfg.model }),
      h("div", { class: "tps-settings" }, [
        h("span", { class: "tps-tp-group", role: "group", "aria-label": "张量并行度 TP" },
          [h("span", { class: "tps-label", text: "TP" })].concat(tpButtons)),
        h("label", { class: "tps-label" }, ["N ", tokensInput]),
        h("label", { class: "tps-label" }, ["激活 ", dtypeSelect])
      ])
    ]);

    // 步骤条：三组，按钮可点；只有当前这一步在 Tab 顺序里（方向键在它们之间移动）
    var groupsBox = h("div", { class: "tps-groups" });

    // 控制：上一步 / 下一步 / 播放
    var prevBtn = h("button", { type: "button", class: "tps-nav", "aria-label": "上一步（←）", text: "◀ 上一步", onclick: function () { go(state.step - 1); } });
    var nextBtn = h("button", { type: "button", class: "tps-nav", "aria-label": "下一步（→）", text: "下一步 ▶", onclick: function () { go(state.step + 1); } });
    var playBtn = h("button", { type: "button", class: "tps-nav tps-play", "aria-pressed": "false", "aria-label": "自动播放", text: "播放", onclick: function () { togglePlay(); } });
    var counter = h("span", { class: "tps-counter", "aria-hidden": "true" });
    var controls = h("div", { class: "tps-controls" }, [prevBtn, counter, nextBtn, playBtn,
      h("span", { class: "tps-keys", text: "← → 换步 · Home/End · 数字键或 T 换 TP" })]);

    var panel = h("div", { class: "tps-panel" });
    var summary = h("div", { class: "tps-summary" });
    var live = h("div", { class: "tps-live", "aria-live": "polite" });
    var legend = h("div", { class: "tps-legend", "aria-label": "图例" }, [
      legendItem("weight", "本 rank 持有的权重 / KV"),
      legendItem("full", "完整：各 rank 相同"),
      legendItem("partial", "部分和：形状完整，要相加"),
      legendItem("shard", "分片：各 rank 一段"),
      legendItem("empty", "不在本 rank"),
      h("span", { class: "tps-legend-item" }, [h("span", { class: "tps-comm-mark", text: "Σ" }), "all-reduce"]),
      h("span", { class: "tps-legend-item" }, [h("span", { class: "tps-comm-mark tps-gather", text: "‖" }), "all-gather"])
    ]);

    root.appendChild(head);
    root.appendChild(groupsBox);
    root.appendChild(controls);
    root.appendChild(panel);
    root.appendChild(summary);
    root.appendChild(legend);
    root.appendChild(live);

    function legendItem(kind, label) {
      return h("span", { class: "tps-legend-item" }, [h("span", { class: "tps-swatch tps-" + kind }), label]);
    }

    root.addEventListener("keydown", function (e) {
      var t = e.target;
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      if (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA") return;
      var k = e.key, handled = true;
      if (k === "ArrowRight" || k === "ArrowDown") go(state.step + 1);
      else if (k === "ArrowLeft" || k === "ArrowUp") go(state.step - 1);
      else if (k === "Home") go(0);
      else if (k === "End") go(cur.length - 1);
      else if (k === "t" || k === "T") cycleTp();
      else if (/^[1-9]$/.test(k) && Number(k) <= tps.length) setTp(tps[Number(k) - 1]);
      else handled = false;
      if (handled) e.preventDefault();
    });

    var cur = [], P = null;

    function setTp(tp) {
      if (tpProblem(cfg, tp) || tps.indexOf(tp) < 0) return;
      state.tp = tp;
      render();
    }
    function cycleTp() {
      var i = tps.indexOf(state.tp);
      for (var n = 1; n <= tps.length; n++) {
        var c = tps[(i + n) % tps.length];
        if (!tpProblem(cfg, c)) { setTp(c); return; }
      }
    }
    function go(i) {
      i = Math.max(0, Math.min(cur.length - 1, i));
      if (i === state.step) return;
      state.step = i;
      if (state.timer) restartTimer();
      render();
    }
    function restartTimer() {
      clearInterval(state.timer);
      state.timer = setInterval(function () {
        if (state.step >= cur.length - 1) { togglePlay(); return; }
        state.step += 1;
        render();
      }, PLAY_MS);
    }
    function togglePlay() {
      if (state.timer) {
        clearInterval(state.timer);
        state.timer = null;
      } else {
        if (state.step >= cur.length - 1) state.step = 0;
        restartTimer();
      }
      playBtn.setAttribute("aria-pressed", state.timer ? "true" : "false");
      playBtn.textContent = state.timer ? "暂停" : "播放";
      playBtn.setAttribute("aria-label", state.timer ? "暂停自动播放" : "自动播放");
      render();
    }

    function renderSteps() {
      groupsBox.textContent = "";
      var groups = [["pre", "嵌入"], ["layer", "第 1 层（每层相同）"], ["post", "输出"]];
      groups.forEach(function (g) {
        var ol = h("ol", { class: "tps-steps", "aria-label": g[1] });
        cur.forEach(function (s, i) {
          var inGroup = s.scope === g[0] || (g[0] === "layer" && s.scope === "stack");
          if (!inGroup) return;
          var active = i === state.step;
          ol.appendChild(h("li", null, [h("button", {
            type: "button", class: "tps-chip" + (s.comm ? " tps-chip-comm" : "") + (active ? " tps-active" : ""),
            "data-step": i, "aria-current": active ? "step" : null, tabindex: active ? "0" : "-1",
            "aria-label": "第 " + (i + 1) + " 步：" + s.title,
            onclick: function () { go(i); }
          }, [h("span", { class: "tps-chip-n", text: String(i + 1) }), s.chip])]));
        });
        groupsBox.appendChild(h("div", { class: "tps-group tps-group-" + g[0] }, [h("div", { class: "tps-group-name", text: g[1] }), ol]));
      });
    }

    function commBytes(s) {
      var b = DTYPES[state.dtype], n = state.tokens, p = P.tp;
      if (s.comm === "all-reduce") {
        var size = n * s.commDim * b;
        return { size: size, send: 2 * (p - 1) / p * size, what: tshape([n, s.commDim]) + " " + state.dtype, factor: "2(p−1)/p" };
      }
      var full = n * s.commDim * 4; // logits 先转成 float32 再 all-gather
      return { size: full, send: (p - 1) / p * full, what: tshape([n, s.commDim]) + " float32", factor: "(p−1)/p" };
    }

    function cell(spec, side) {
      return h("div", { class: "tps-cell tps-" + side, role: "cell" }, [
        h("div", { class: "tps-barbox" }, [barEl(spec.kind, spec.segs)]),
        h("div", { class: "tps-info" }, [
          h("span", { class: "tps-shape", text: spec.shape }),
          spec.kind !== "weight" && STATE_NAMES[spec.kind] ? h("span", { class: "tps-tag tps-tag-" + spec.kind, text: STATE_NAMES[spec.kind] }) : null,
          // 说明里的「（与 rank 1 共用）」不从中间断开：放不下就整段换到下一行
          spec.detail ? h("span", { class: "tps-detail" }, spec.detail.split(/(?=（)/).map(function (part, i) {
            return i ? h("span", { class: "tps-nb", text: part }) : part;
          })) : null
        ])
      ]);
    }

    // 每个 rank 一行；各行是同一个网格的子网格（subgrid），列对齐，通信那一步的「Σ / ⧉」竖条跨过所有行
    function renderRanks(s) {
      var grid = h("div", { class: "tps-ranks" + (s.comm ? " tps-has-comm" : ""), role: "table", "aria-label": "各 rank：" + s.leftTitle + "与" + s.rightTitle });
      var colhead = function (title, spec, col) {
        var named = spec.segs.some(function (x) { return x.name; });
        return h("span", { role: "columnheader", class: "tps-ch-" + col }, [
          h("span", { class: "tps-ch-title", text: title }),
          named ? h("span", { class: "tps-ch-scale" }, [barEl("", spec.segs, true)]) : null
        ]);
      };
      grid.appendChild(h("div", { class: "tps-row tps-colhead", role: "row", style: "grid-row: 1" }, [
        h("span", { role: "columnheader", class: "tps-ch-rank", text: "" }),
        colhead(s.leftTitle, s.left(P.ranks[0]), "left"),
        colhead(s.rightTitle, s.right(P.ranks[0]), "right")
      ]));
      P.ranks.forEach(function (a) {
        var kvGroup = P.replicas > 1 && (s.id === "qkv" || s.id === "attn") ? " tps-kvgroup-" + (a.kv[0] % 2) : "";
        grid.appendChild(h("div", { class: "tps-row" + kvGroup, role: "row", "data-rank": a.rank, style: "grid-row: " + (a.rank + 2) }, [
          h("span", { class: "tps-rank", role: "rowheader", text: "rank " + a.rank }),
          cell(s.left(a), "left"),
          s.comm ? null : h("span", { class: "tps-arrow", "aria-hidden": "true", text: "→" }),
          cell(s.right(a), "right")
        ]));
      });
      if (s.comm) {
        var gather = s.comm === "all-gather";
        grid.appendChild(h("div", {
          class: "tps-commband" + (gather ? " tps-gather" : "") + (P.tp === 1 ? " tps-skipped" : ""),
          style: "grid-row: 2 / span " + P.tp, "aria-hidden": "true"
        }, [h("span", { class: "tps-comm-sym", text: gather ? "‖" : "Σ" }), h("span", { class: "tps-comm-word", text: gather ? "拼接" : "求和" })]));
      }
      return grid;
    }

    function renderStack(s) {
      var ladder = h("div", { class: "tps-ladder", "aria-label": "一次前向里的通信" });
      var tile = function (name, ars, ags) {
        var marks = [];
        for (var i = 0; i < ars; i++) marks.push(h("span", { class: "tps-dot", title: "all-reduce" }));
        for (var j = 0; j < ags; j++) marks.push(h("span", { class: "tps-square", title: "all-gather" }));
        return h("div", { class: "tps-tile" }, [h("span", { class: "tps-tile-name", text: name }), h("span", { class: "tps-marks" }, marks)]);
      };
      var c = counts(cur, P.L), pre = 0, post = 0;
      cur.forEach(function (x) {
        if (x.comm === "all-reduce" && x.scope === "pre") pre++;
        if (x.comm === "all-gather" && x.scope === "post") post++;
      });
      ladder.appendChild(tile("嵌入", pre, 0));
      for (var l = 1; l <= P.L; l++) ladder.appendChild(tile("第 " + l + " 层", c.layerAR, 0));
      ladder.appendChild(tile("lm_head", 0, post));
      if (P.tp === 1) ladder.classList.add("tps-skipped");
      return ladder;
    }

    function renderPanel() {
      var s = cur[state.step];
      panel.textContent = "";
      var badge = s.comm
        ? h("span", { class: "tps-badge tps-badge-comm" + (s.comm === "all-gather" ? " tps-gather" : ""), text: P.tp === 1 ? s.comm + "（TP=1 跳过）" : s.comm })
        : s.scope === "stack" ? null : h("span", { class: "tps-badge", text: "无通信" });
      panel.appendChild(h("div", { class: "tps-step-head" }, [
        h("span", { class: "tps-step-n", text: "第 " + (state.step + 1) + " 步" }),
        h("h4", { class: "tps-step-title", text: s.title }), badge
      ]));
      panel.appendChild(rich("p", "tps-text", s.text));
      var facts = [];
      if (s.full) facts.push(h("span", { class: "tps-fact", text: s.full }));
      if (s.full && s.left) {
        var w0 = s.left(P.ranks[0]);
        facts.push(h("span", { class: "tps-fact", text: "每个 rank " + (w0.formula || "") + w0.shape }));
      }
      if (s.comm && P.tp > 1) {
        var b = commBytes(s);
        facts.push(h("span", { class: "tps-fact tps-bytes", text: "张量 " + b.what + " = " + bytes(b.size) +
          "；环形算法下每个 rank 发送约 " + b.factor + " 倍 = " + bytes(b.send) }));
      }
      if (facts.length) panel.appendChild(h("div", { class: "tps-facts" }, facts));
      panel.appendChild(s.scope === "stack" ? renderStack(s) : renderRanks(s));
    }

    function renderSummary() {
      var c = counts(cur, P.L), upto = countsUpTo(cur, state.step, P.L), one = P.tp === 1;
      if (one) upto = { ar: 0, ag: 0 };
      var cond = one ? "TP>1 时：" : "";
      summary.textContent = "";
      var b = function (role, v) { return h("b", { "data-role": role, text: String(v) }); };
      var arSize = state.tokens * P.H * DTYPES[state.dtype], agSize = state.tokens * P.V * 4;
      var lines = [
        h("div", null, [cond + "每层 all-reduce ", b("layer-allreduce", c.layerAR), " 次（o_proj 之后、down_proj 之后），其余都是本地计算。"]),
        h("div", null, [cond + "一次前向（", b("layers", P.L), " 层）：all-reduce ", b("total-allreduce", c.totalAR), " 次 = ",
          P.L + " × " + c.layerAR + " + " + (c.totalAR - P.L * c.layerAR) + "（嵌入），all-gather ", b("total-allgather", c.totalAG), " 次（lm_head）。"]),
        h("div", null, ["到这一步为止：all-reduce ", b("upto-allreduce", upto.ar), " 次，all-gather ", b("upto-allgather", upto.ag), " 次。"])
      ];
      if (P.tp === 1) {
        lines.push(h("div", { class: "tps-note", "data-role": "tp1-note", text: "TP=1：只有一个 rank，这些通信全部跳过，实际 0 次。" }));
      } else {
        lines.push(h("div", { class: "tps-note" }, ["N = " + state.tokens + "、" + state.dtype + "：每次 all-reduce 的张量 " + bytes(arSize) +
          "，一次前向的 all-reduce 共 " + bytes(arSize * c.totalAR) + "，all-gather 的 logits（float32）" + bytes(agSize) + "。"]));
      }
      summary.appendChild(h("div", { class: "tps-summary-title", text: "通信（TP=" + P.tp + "）" }));
      lines.forEach(function (l) { summary.appendChild(l); });
    }

    function render() {
      P = plan(cfg, state.tp);
      cur = steps(cfg, P);
      state.step = Math.max(0, Math.min(cur.length - 1, state.step));
      root.setAttribute("data-step", String(state.step));
      root.setAttribute("data-tp", String(state.tp));
      root.classList.toggle("tps-many", P.tp >= 8);
      tpButtons.forEach(function (btn) {
        var on = Number(btn.getAttribute("data-tp")) === state.tp;
        btn.setAttribute("aria-pressed", on ? "true" : "false");
        btn.classList.toggle("tps-active", on);
      });
      var focusedChip = document.activeElement && document.activeElement.classList &&
        document.activeElement.classList.contains("tps-chip");
      renderSteps();
      if (focusedChip) {
        var chip = groupsBox.querySelector('[data-step="' + state.step + '"]');
        if (chip) chip.focus();
      }
      counter.textContent = (state.step + 1) + " / " + cur.length;
      var focused = document.activeElement;
      prevBtn.disabled = state.step === 0;
      nextBtn.disabled = state.step === cur.length - 1;
      if ((focused === prevBtn && prevBtn.disabled) || (focused === nextBtn && nextBtn.disabled)) root.focus();
      renderPanel();
      renderSummary();
      live.textContent = "TP=" + state.tp + "，第 " + (state.step + 1) + " 步，共 " + cur.length + " 步：" + cur[state.step].title;
    }

    render();
  }

  function mountAll() {
    var nodes = document.querySelectorAll(".tp-stepper:not([data-tp-mounted])");
    for (var i = 0; i < nodes.length; i++) mount(nodes[i]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
  // mkdocs-material 的即时导航换页时不重新加载脚本：它的 document$ 每换一页发一次
  if (window.document$ && typeof window.document$.subscribe === "function") window.document$.subscribe(mountAll);
})();

// 图的放大浮层：点正文里带 class="nb-zoom" 的链接（tools/mkdocs_hooks.py 给每张 SVG 图加的），
// 图在浮层里按窗口宽度放大（最多原尺寸的 1.6 倍，至少原尺寸），再点一下或按 Esc 关掉。
(function () {
  function open(link) {
    var img = link.querySelector("img");
    var overlay = document.createElement("div");
    overlay.className = "nb-zoom-overlay";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "放大的图（点击或按 Esc 关闭）");
    var big = document.createElement("img");
    big.src = link.href;
    big.alt = img ? img.alt : "";
    var natural = img && img.naturalWidth ? img.naturalWidth : 960;
    // 放大到接近窗口宽（最多原尺寸的 1.6 倍）；比窗口还宽的图按原尺寸显示，浮层里可以滚动
    big.style.width = Math.max(natural, Math.min(window.innerWidth * 0.96, natural * 1.6)) + "px";
    overlay.appendChild(big);
    function close() {
      overlay.remove();
      document.removeEventListener("keydown", onKey);
    }
    function onKey(e) {
      if (e.key === "Escape") close();
    }
    overlay.addEventListener("click", close);
    document.addEventListener("keydown", onKey);
    document.body.appendChild(overlay);
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.nb-zoom");
    if (!link || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    open(link);
  });
})();

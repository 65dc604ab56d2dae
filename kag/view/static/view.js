// kag view: keyboard moves in the question grid (j/k, Enter) and "/" to search. No data is
// ever inserted as HTML: the page is rendered (escaped) by the server.
(function () {
  "use strict";
  var current = -1;
  function rows() { return document.querySelectorAll("#grid tr.row"); }
  function select(i) {
    var r = rows();
    if (!r.length) { return; }
    i = Math.max(0, Math.min(r.length - 1, i));
    if (current >= 0 && r[current]) { r[current].classList.remove("current"); }
    current = i;
    r[i].classList.add("current");
    r[i].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) {
      if (e.key === "Escape") { t.blur(); }
      return;
    }
    if (e.key === "j") { select(current + 1); }
    else if (e.key === "k") { select(current - 1); }
    else if (e.key === "Enter" && current >= 0) {
      var a = rows()[current].querySelector("a.open");
      if (a) { window.location.href = a.getAttribute("href"); }
    } else if (e.key === "/") {
      var q = document.getElementById("q");
      if (q) { e.preventDefault(); q.focus(); }
    }
  });
})();

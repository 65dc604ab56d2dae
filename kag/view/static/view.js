// kag view: keyboard moves in the question grid (j/k, Enter) and "/" to search; on a
// question's page j/k open the next and previous question of the list it came from. The
// filter form sends only the fields that are set, so that an address names what was chosen.
// No data is ever inserted as HTML: the page is rendered (escaped) by the server.
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
  function follow(id) {
    var a = document.getElementById(id);
    if (a) { window.location.href = a.getAttribute("href"); }
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) { return; }
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) {
      if (e.key === "Escape") { t.blur(); }
      return;
    }
    var grid = rows().length > 0;
    if (e.key === "j") { if (grid) { select(current + 1); } else { follow("next-q"); } }
    else if (e.key === "k") { if (grid) { select(current - 1); } else { follow("prev-q"); } }
    else if (e.key === "Enter" && grid && current >= 0) {
      var a = rows()[current].querySelector("a.open");
      if (a) { window.location.href = a.getAttribute("href"); }
    } else if (e.key === "/") {
      var q = document.getElementById("q");
      if (q) { e.preventDefault(); q.focus(); }
    }
  });
  var form = document.getElementById("filters");
  if (form) {
    form.addEventListener("submit", function () {
      var els = form.elements;
      for (var i = 0; i < els.length; i++) {
        if (els[i].name && els[i].value === "") { els[i].disabled = true; }
      }
      // Every column ticked in the setups' own order is the default: the address need not say it.
      var boxes = form.querySelectorAll("input[name=setup]");
      var all = form.querySelectorAll("#flip-a option");
      var plain = boxes.length === all.length - 1;
      for (var j = 0; plain && j < boxes.length; j++) {
        plain = boxes[j].checked && boxes[j].value === all[j + 1].value;
      }
      if (plain) { for (var k = 0; k < boxes.length; k++) { boxes[k].disabled = true; } }
    });
    window.addEventListener("pageshow", function () {
      var els = form.elements;
      for (var i = 0; i < els.length; i++) { els[i].disabled = false; }
    });
  }
})();

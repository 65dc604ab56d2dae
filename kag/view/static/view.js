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
// A question's retrieved subgraphs, drawn by Cytoscape.js (served from this server) from
// the JSON the page holds in <script type="application/json"> elements: labels are drawn
// on a canvas, and the line under a graph is set with textContent, never as HTML.
(function () {
  "use strict";
  if (typeof window.cytoscape !== "function") { return; }
  var boxes = document.querySelectorAll("div.cy[data-graph]");
  window.kagGraphs = {};
  var style = [
    { selector: "node", style: {
      "label": "data(label)", "font-size": 10, "text-valign": "bottom", "text-margin-y": 3,
      "text-wrap": "ellipsis", "text-max-width": 140, "width": 14, "height": 14,
      "background-color": "#8fa3bf", "color": "#222", "text-background-color": "#fff",
      "text-background-opacity": 0.7 } },
    { selector: "node[?gold]", style: { "background-color": "#E69F00", "font-weight": "bold" } },
    { selector: "node[seed]", style: { "border-width": 4, "border-color": "#0072B2", "width": 18, "height": 18 } },
    { selector: "edge", style: {
      "label": "data(label)", "font-size": 8, "color": "#556", "curve-style": "bezier",
      "target-arrow-shape": "triangle", "width": 1.2, "line-color": "#aab",
      "target-arrow-color": "#aab", "text-rotation": "autorotate",
      "text-background-color": "#fff", "text-background-opacity": 0.7 } },
    { selector: "edge[?gold]", style: { "line-color": "#D55E00", "target-arrow-color": "#D55E00", "width": 3, "color": "#a40" } },
    { selector: ":selected", style: { "overlay-color": "#36c", "overlay-opacity": 0.2 } }
  ];
  function describe(el) {
    var d = el.data();
    if (el.isNode()) {
      var parts = [d.label, "id " + d.key];
      if (d.seed) { parts.push("seed #" + d.seed); }
      if (d.gold) { parts.push("gold evidence"); }
      return parts.join(" · ");
    }
    return el.source().data("label") + " -[" + d.label + "]-> " + el.target().data("label") +
      (d.gold ? " · gold triple" : "");
  }
  // The whole graph in its box, a small one not blown up past 1.5x.
  function fitBox(cy) {
    cy.fit(undefined, 20);
    if (cy.zoom() > 1.5) { cy.zoom(1.5); cy.center(); }
  }
  // One function per box: each graph's handlers keep their own box, line and instance.
  function draw(box) {
    var source = document.getElementById(box.getAttribute("data-graph"));
    if (!source) { return; }
    var data = JSON.parse(source.textContent);
    var side = Math.max(400, 70 * Math.sqrt(data.nodes.length));
    var elements = [];
    data.nodes.forEach(function (n) {
      var d = { id: n.id, key: n.key, label: n.label, gold: n.gold };
      if (n.seed !== null) { d.seed = n.seed; }
      elements.push({ group: "nodes", data: d, position: { x: n.x * side, y: n.y * side } });
    });
    data.edges.forEach(function (e) {
      elements.push({ group: "edges", data: { id: e.id, source: e.source, target: e.target, label: e.label, gold: e.gold } });
    });
    var cy = window.cytoscape({
      container: box, elements: elements, style: style, minZoom: 0.1, maxZoom: 4,
      layout: { name: "preset" }
    });
    if (data.nodes.length > 1) {
      cy.layout({ name: "cose", randomize: false, animate: false, nodeDimensionsIncludeLabels: true,
        idealEdgeLength: function () { return 90; }, nodeRepulsion: function () { return 9000; } }).run();
    }
    fitBox(cy);
    window.kagGraphs[box.id] = cy;
    var info = document.getElementById(box.id + "-info");
    if (info) {
      cy.on("tap", "node, edge", function (ev) { info.textContent = describe(ev.target); });
    }
    var fit = document.getElementById(box.id + "-fit");
    if (fit) {
      fit.hidden = false;
      fit.addEventListener("click", function () { fitBox(cy); });
    }
  }
  for (var i = 0; i < boxes.length; i++) { draw(boxes[i]); }
})();

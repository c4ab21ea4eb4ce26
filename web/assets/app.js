// cronlock dashboard: the little script it has. No library, no build step.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Live output seam: a run page whose #output carries data-live (the
  // address of its output stream, once nodes publish it) appends the
  // stream's lines as they come. Empty today: the page shows the stored tail.
  var out = document.getElementById("output");
  if (out && out.dataset.live && window.EventSource) {
    var es = new EventSource(out.dataset.live);
    es.onmessage = function (ev) { out.textContent += ev.data + "\n"; out.scrollTop = out.scrollHeight; };
    es.addEventListener("end", function () { es.close(); });
  }
});

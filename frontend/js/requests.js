// The request form shows the fields of the kind chosen (queue quota or budget); without
// scripts both sets show, each under its own legend.
(function () {
  "use strict";
  function sync(form) {
    var chosen = form.querySelector("input[name=kind]:checked");
    form.querySelectorAll("fieldset[data-kind]").forEach(function (fieldset) {
      var shown = !chosen || fieldset.getAttribute("data-kind") === chosen.value;
      fieldset.hidden = !shown;
      fieldset.disabled = !shown;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-request-form]").forEach(function (form) {
      sync(form);
      form.addEventListener("change", function (event) {
        if (event.target.name === "kind") { sync(form); }
      });
    });
  });
})();

// Accessible names the page's parts lack (dlnotes, _ext/dlnotes_site.py). Widgets and folded cells appear after
// the page has loaded, so the names are given again whenever something new appears.
(function () {
  "use strict";
  const words = (element) => element.textContent.replace(/\s+/g, " ").trim();

  function nameSliders() {
    // ipywidgets draws a slider as a label beside a noUiSlider whose handle (role="slider") has no name.
    for (const handle of document.querySelectorAll(".widget-slider .noUi-handle:not([aria-label])")) {
      const label = handle.closest(".widget-slider").querySelector(".widget-label");
      if (label && words(label)) handle.setAttribute("aria-label", words(label));
    }
  }

  function describeFrames() {
    // ipywidgets' Image has no alt, so dlnotes stores a widget frame's alt text as its tooltip (the title).
    for (const image of document.querySelectorAll("img.widget-image[title]")) {
      image.setAttribute("alt", image.getAttribute("title"));
      image.removeAttribute("title");
    }
  }

  function nameButtons() {
    // The theme's search button shows "Search Ctrl+K" but is named "Search", a folded cell shows "Show code cell
    // source" but is named "Toggle hidden content"; the colour-mode button is named "Color mode" beside icons
    // titled Light, Dark, System Settings. A name must contain the visible words.
    for (const button of document.querySelectorAll(".search-button__button, summary[aria-label]")) {
      const visible = words(button);
      if (visible && button.getAttribute("aria-label") !== visible) button.setAttribute("aria-label", visible);
    }
    // Font Awesome may already have turned the icons into SVGs, each titled by an inner <title>.
    for (const icon of document.querySelectorAll(".theme-switch-button .theme-switch:not([aria-hidden])")) {
      icon.setAttribute("aria-hidden", "true");
    }
    for (const title of document.querySelectorAll(".theme-switch-button [title], .theme-switch-button title")) {
      if (title.tagName.toLowerCase() === "title") title.remove();
      else title.removeAttribute("title");
    }
  }

  function nameAll() {
    nameSliders();
    describeFrames();
    nameButtons();
  }

  document.addEventListener("DOMContentLoaded", () => {
    nameAll();
    new MutationObserver(nameAll).observe(document.body, { childList: true, subtree: true });
  });
})();

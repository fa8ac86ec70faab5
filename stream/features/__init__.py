"""Features built by the composition root only when the suite file or the settings ask for them."""

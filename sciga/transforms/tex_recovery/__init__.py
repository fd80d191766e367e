"""The TeX recovery stage (between parse and link): figures that the page lost, recovered from
the paper's TeX source."""

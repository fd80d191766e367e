"""arXiv e-prints and TeX: reading one safely, bulk source tars, TeX graphics and figures,
rasterizing PDF/EPS figures."""

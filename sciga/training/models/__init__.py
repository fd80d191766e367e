"""Models of the baselines: torchvision classifiers (GA-BC) and CLIP-style dual encoders
(Abs2Fig). Weights only ever come from local files."""

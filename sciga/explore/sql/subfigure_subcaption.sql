-- subfigure_subcaption: MedICaT-style (Subramanian et al., 2020) subfigure-subcaption pairs.
-- One row per subfigure that has a subcaption: from the HTML (subcaption_source 'html') or
-- split from the parent caption by panel labels and aligned in reading order
-- ('split_parent'). subcaption keeps the <TAG> label token; subcaption_text drops it.
-- panel is the subfigure's 1-based position in reading order inside its figure.
SELECT f.paper_id,
       f.parent_id AS figure_id,
       f.id AS subfigure_id,
       CAST(regexp_extract(f.id, '\.([0-9]+)$', 1) AS INTEGER) AS panel,
       f.label,
       f.subcaption,
       trim(regexp_replace(f.subcaption, '^\s*<TAG>.*?</TAG>\s*', '')) AS subcaption_text,
       f.subcaption_source,
       f.caption AS figure_caption,
       f.image,
       f.image_kind,
       f.medical.is_medical AS is_medical
FROM figures AS f
WHERE f.kind = 'subfigure' AND f.subcaption IS NOT NULL
ORDER BY f.paper_id, f.index, panel

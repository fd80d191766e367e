-- ga_candidates: SciGA intra-GA recommendation input (Kawada et al., 2025): per paper, the
-- abstract and every candidate figure with its caption stripped of <TAG> tokens (SciGA
-- removes "Figure 1" tags so a model cannot learn the position), plus the paper's own
-- graphical abstract when it has one (candidate_kind 'graphical_abstract', image by path).
-- Labels: is_teaser (parser), ga_role (vision stage), in_ga_components (the figure is part
-- of, or is, the paper's GA: a Reused/Modified GA's components or a de-facto GA), is_ga
-- (the candidate is the ground-truth GA: the GA itself, else the de-facto GA figure).
WITH figure_candidates AS (
    SELECT p.id AS paper_id,
           p.abstract,
           'figure' AS candidate_kind,
           f.id AS candidate_id,
           f.index AS figure_index,
           trim(regexp_replace(f.caption, '<TAG>.*?</TAG>\s*', '', 'g')) AS caption,
           f.image,
           f.image.path AS image_path,
           f.is_teaser,
           f.ga_role,
           p.graphical_abstract.type AS ga_type,
           coalesce(list_contains(p.graphical_abstract.components, f.id), FALSE) AS in_ga_components,
           coalesce(p.graphical_abstract.de_facto AND list_contains(p.graphical_abstract.components, f.id), FALSE) AS is_ga
    FROM papers AS p
    JOIN figures AS f ON f.paper_id = p.id AND f.kind = 'figure'
),
ga_candidates AS (
    SELECT p.id AS paper_id,
           p.abstract,
           'graphical_abstract' AS candidate_kind,
           p.graphical_abstract.id AS candidate_id,
           NULL::INTEGER AS figure_index,
           trim(regexp_replace(coalesce(p.graphical_abstract.caption, ''), '<TAG>.*?</TAG>\s*', '', 'g')) AS caption,
           NULL AS image,
           p.graphical_abstract.paths[1] AS image_path,
           FALSE AS is_teaser,
           'graphical_abstract' AS ga_role,
           p.graphical_abstract.type AS ga_type,
           TRUE AS in_ga_components,
           TRUE AS is_ga
    FROM papers AS p
    WHERE p.graphical_abstract IS NOT NULL AND NOT coalesce(p.graphical_abstract.de_facto, FALSE)
)
SELECT * FROM figure_candidates
UNION ALL BY NAME
SELECT * FROM ga_candidates
ORDER BY paper_id, candidate_kind DESC, figure_index

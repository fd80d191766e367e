-- method_diagrams: PaperBanana (Zhu et al., 2026) input (S, I, C): the methodology section
-- text, a diagram image and its caption, with the image's aspect ratio w:h.
-- The methodology section is the first top-level section whose title names a method
-- ("Method(s)", "Methodology", "Approach", "Model", "Proposed ...", "Our model/framework",
-- "Model architecture", "Framework"); its text joins the section and its subsections.
-- Candidates: single-image figures (compound figures have no image of their own) placed
-- in that section or mentioned from it. diagram_caption flags captions that read like a
-- method diagram (overview / architecture / framework / pipeline ...) for a stricter cut.
-- Size: decoded pixels (figures.width/height) when the vision stage filled them, else
-- the display size LaTeXML wrote in the HTML (papers.figures[].images[]); size_source
-- says which. Rows without a known size are left out. Parameters (PaperBanana keeps w:h in
-- [1.5, 2.5]); set them with `sciga sql OUT --view method_diagrams --param min_ratio=1.2`,
-- connect(OUT, params={"method_diagrams.min_ratio": 1.2}) or SET VARIABLE method_diagrams_min_ratio = 1.2:
-- @param min_ratio DOUBLE 1.5: smallest width / height kept
-- @param max_ratio DOUBLE 2.5: largest width / height kept
WITH sections AS (
    SELECT p.id AS paper_id, p.sections[s.k].id AS section_id, s.k AS section_k, p.sections[s.k].level AS level,
           trim(regexp_replace(p.sections[s.k].title, '<TAG>.*?</TAG>\s*', '', 'g')) AS title, p.sections[s.k].body AS body
    FROM papers AS p, unnest(range(1, len(p.sections) + 1)) AS s(k)
),
method_root AS (
    SELECT paper_id, arg_min(section_id, section_k) AS section_id
    FROM sections
    WHERE level = 1
      AND regexp_matches(title, '(?i)^(?:(?:the|our)\s+)?(?:proposed\s+\w+|methods?|methodology|approach|framework|models?|model\s+architecture|architecture|our\s+(?:method|approach|model|framework))\b')
    GROUP BY paper_id
),
method_sections AS (
    SELECT s.*
    FROM sections AS s
    JOIN method_root AS r ON r.paper_id = s.paper_id
     AND (s.section_id = r.section_id OR starts_with(s.section_id, r.section_id || '.'))
),
method_text AS (
    SELECT paper_id,
           any_value(CASE WHEN level = 1 THEN section_id END) AS method_section_id,
           any_value(CASE WHEN level = 1 THEN title END) AS method_section_title,
           string_agg(CASE WHEN title <> '' THEN title || E'\n\n' || body ELSE body END, E'\n\n' ORDER BY section_k) AS method_text
    FROM method_sections
    GROUP BY paper_id
),
mentioned_in_method AS (
    SELECT DISTINCT m.paper_id, regexp_extract(m.figure_id, '^(.*_F[0-9]+)', 1) AS figure_id
    FROM mentions AS m
    JOIN method_sections AS ms ON ms.paper_id = m.paper_id AND ms.section_id = m.section_id
),
html_images AS (
    SELECT p.id AS paper_id, t.fig.id AS figure_id, t.fig.images[i.k].path AS path, i.k,
           t.fig.images[i.k].width AS width, t.fig.images[i.k].height AS height
    FROM papers AS p, unnest(p.figures) AS t(fig), unnest(range(1, len(t.fig.images) + 1)) AS i(k)
    WHERE t.fig.images[i.k].width > 0 AND t.fig.images[i.k].height > 0
),
html_sizes AS (
    SELECT paper_id, figure_id, path, arg_min(width, k) AS width, arg_min(height, k) AS height
    FROM html_images
    GROUP BY paper_id, figure_id, path
),
candidates AS (
    SELECT f.paper_id,
           f.id AS figure_id,
           f.number,
           f.caption,
           trim(regexp_replace(f.caption, '<TAG>.*?</TAG>\s*', '', 'g')) AS caption_text,
           f.image,
           mt.method_section_id,
           mt.method_section_title,
           mt.method_text,
           f.section_id IN (SELECT section_id FROM method_sections AS ms WHERE ms.paper_id = f.paper_id) AS in_method_section,
           mim.figure_id IS NOT NULL AS mentioned_in_method,
           regexp_matches(f.caption, '(?i)\b(overview|architecture|framework|pipeline|diagram|workflow|illustration|schematic|flowchart)\b') AS diagram_caption,
           hs.width AS html_width,
           hs.height AS html_height,
           f.width AS decoded_width,
           f.height AS decoded_height
    FROM figures AS f
    JOIN method_text AS mt ON mt.paper_id = f.paper_id
    LEFT JOIN mentioned_in_method AS mim ON mim.paper_id = f.paper_id AND mim.figure_id = f.id
    LEFT JOIN html_sizes AS hs ON hs.paper_id = f.paper_id AND hs.figure_id = f.id
                                AND hs.path IS NOT DISTINCT FROM f.image_paths[1]
    -- a figure with its own image file (embedded or not: a --no-images build keeps the HTML size)
    WHERE f.kind = 'figure' AND coalesce(f.image_status, '') <> 'in_subfigures' AND len(f.image_paths) > 0
),
sized AS (
    SELECT c.* EXCLUDE (html_width, html_height, decoded_width, decoded_height),
           CASE WHEN c.decoded_width > 0 AND c.decoded_height > 0 THEN c.decoded_width ELSE c.html_width END AS width,
           CASE WHEN c.decoded_width > 0 AND c.decoded_height > 0 THEN c.decoded_height ELSE c.html_height END AS height,
           CASE WHEN c.decoded_width > 0 AND c.decoded_height > 0 THEN 'decoded'
                WHEN c.html_width > 0 THEN 'html' END AS size_source
    FROM candidates AS c
    WHERE c.in_method_section OR c.mentioned_in_method
)
SELECT paper_id, figure_id, number, method_section_id, method_section_title, method_text,
       caption, caption_text, image, width, height, size_source,
       round(width::DOUBLE / height, 4) AS aspect_ratio,
       in_method_section, mentioned_in_method, diagram_caption
FROM sized
WHERE size_source IS NOT NULL
  AND width::DOUBLE / height BETWEEN coalesce(getvariable('method_diagrams_min_ratio'), 1.5)::DOUBLE
                                 AND coalesce(getvariable('method_diagrams_max_ratio'), 2.5)::DOUBLE
ORDER BY paper_id, figure_id

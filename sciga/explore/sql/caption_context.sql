-- caption_context: SciCap-Eval input (Hsu et al., 2023): each figure with its caption and
-- the body paragraphs that mention it ("figure-mentioning paragraphs").
-- One row per figure (figures.kind = 'figure'); a mention of a subfigure counts for its
-- figure. paragraphs / mention_sentences are in document order, each paragraph once;
-- figures nobody mentions have empty lists (filter with len(paragraphs) > 0).
WITH section_order AS (
    SELECT p.id AS paper_id, p.sections[s.k].id AS section_id, s.k AS section_k, p.sections[s.k].paragraphs AS paragraphs
    FROM papers AS p, unnest(range(1, len(p.sections) + 1)) AS s(k)
),
figure_mentions AS (
    SELECT m.paper_id,
           regexp_extract(m.figure_id, '^(.*_F[0-9]+)', 1) AS figure_id,
           m.section_id, m.paragraph_index, m.char_start, m.sentence
    FROM mentions AS m
    WHERE m.context = 'paragraph'
),
mention_paragraphs AS (
    SELECT fm.paper_id, fm.figure_id, so.section_k, fm.paragraph_index,
           any_value(so.paragraphs[fm.paragraph_index + 1].text) AS paragraph,
           list(DISTINCT fm.sentence) FILTER (WHERE fm.sentence IS NOT NULL) AS sentences,
           count(*) AS n_mentions
    FROM figure_mentions AS fm
    JOIN section_order AS so ON so.paper_id = fm.paper_id AND so.section_id = fm.section_id
    GROUP BY fm.paper_id, fm.figure_id, so.section_k, fm.paragraph_index
)
SELECT f.paper_id,
       f.id AS figure_id,
       f.number,
       f.label,
       f.caption,
       trim(regexp_replace(f.caption, '<TAG>.*?</TAG>\s*', '', 'g')) AS caption_text,
       f.image,
       f.is_teaser,
       coalesce(list(mp.paragraph ORDER BY mp.section_k, mp.paragraph_index)
                FILTER (WHERE mp.paragraph IS NOT NULL), []) AS paragraphs,
       coalesce(flatten(list(mp.sentences ORDER BY mp.section_k, mp.paragraph_index)
                FILTER (WHERE mp.sentences IS NOT NULL)), []) AS mention_sentences,
       coalesce(sum(mp.n_mentions), 0)::BIGINT AS n_mentions
FROM figures AS f
LEFT JOIN mention_paragraphs AS mp ON mp.paper_id = f.paper_id AND mp.figure_id = f.id
WHERE f.kind = 'figure'
GROUP BY f.paper_id, f.id, f.index, f.number, f.label, f.caption, f.image, f.is_teaser
ORDER BY f.paper_id, f.index

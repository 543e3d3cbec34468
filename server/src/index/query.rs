//! Asking the index: symbols by name (exact, identifier parts, one edit away), references,
//! a file's outline, the files it holds.

use super::*;

impl Index {
    /// Definitions matching `query`: exact names first, then names sharing identifier parts,
    /// then near misses (one edit away).
    pub fn symbols(&self, query: &str, kind: Option<&str>, limit: usize) -> Vec<SymbolHit> {
        let f = self.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (_, word) in words(query) {
            let lower = word.to_lowercase();
            let term = |field, text: &str| Term::from_field_text(field, text);
            let boosted = |q: Box<dyn Query>, boost: f32| -> (Occur, Box<dyn Query>) {
                (Occur::Should, Box::new(BoostQuery::new(q, boost)))
            };
            should.push(boosted(
                Box::new(TermQuery::new(
                    term(f.name_raw, word),
                    IndexRecordOption::Basic,
                )),
                8.0,
            ));
            should.push(boosted(
                Box::new(TermQuery::new(
                    term(f.name_lower, &lower),
                    IndexRecordOption::Basic,
                )),
                4.0,
            ));
            for part in identifier_parts(word) {
                should.push((
                    Occur::Should,
                    Box::new(TermQuery::new(
                        term(f.name, &part),
                        IndexRecordOption::WithFreqs,
                    )),
                ));
            }
            if lower.chars().count() >= 4 {
                should.push(boosted(
                    Box::new(FuzzyTermQuery::new(term(f.name_lower, &lower), 1, true)),
                    0.5,
                ));
            }
        }
        if should.is_empty() {
            return Vec::new();
        }
        let mut must: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(BooleanQuery::new(should))),
            (Occur::Must, role_query(f, "def")),
        ];
        if let Some(kind) = kind {
            must.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, kind),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        self.search(&BooleanQuery::new(must), limit)
    }

    /// Where `name` is used (calls, implementations), by path and line.
    pub fn references(&self, name: &str, limit: usize) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.name_raw, name),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (Occur::Must, role_query(f, "ref")),
        ]);
        let mut hits = self.search(&query, limit.max(1) * 4);
        hits.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        hits.truncate(limit);
        hits
    }

    /// The definitions of one file, in order.
    pub fn outline(&self, relative: &str) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.path, relative),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (Occur::Must, role_query(f, "def")),
        ]);
        let mut hits = self.search(&query, 100_000);
        hits.sort_by_key(|hit| (hit.start_line, hit.line, hit.column));
        hits
    }

    /// Every indexed file with the names it defines and references, for the repository map.
    pub fn files(&self) -> BTreeMap<String, FileRecord> {
        self.read_manifest().files.clone()
    }

    /// The best `limit` hits of `query`: from the disk index, except for the files updated
    /// since its last commit, whose hits come from the in-memory index — scored with the disk
    /// index's statistics, so that the two rank together.
    pub(super) fn search(&self, query: &dyn Query, limit: usize) -> Vec<SymbolHit> {
        let searcher = self.reader.searcher();
        let top = TopDocs::with_limit(limit.max(1)).order_by_score();
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|recent| !recent.paths().is_empty())
            .map(|recent| {
                let paths = recent
                    .paths()
                    .iter()
                    .map(|path| Term::from_field_text(self.fields.path, path));
                (recent.searcher(), TermSetQuery::new(paths))
            });
        let Some((recent_searcher, outdated)) = recent else {
            let Ok(found) = searcher.search(query, &top) else {
                return Vec::new();
            };
            return self.hits(&searcher, found);
        };
        let current = BooleanQuery::new(vec![
            (Occur::Must, query.box_clone()),
            (Occur::MustNot, Box::new(outdated)),
        ]);
        let (Ok(on_disk), Ok(updated)) = (
            searcher.search(&current, &top),
            recent_searcher.search_with_statistics_provider(query, &top, &searcher),
        ) else {
            return Vec::new();
        };
        let mut hits = self.hits(&searcher, on_disk);
        hits.extend(self.hits(&recent_searcher, updated));
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit.max(1));
        hits
    }

    pub(super) fn hits(
        &self,
        searcher: &tantivy::Searcher,
        top: Vec<(f32, tantivy::DocAddress)>,
    ) -> Vec<SymbolHit> {
        let f = self.fields;
        top.into_iter()
            .filter_map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address).ok()?;
                let text = |field| {
                    doc.get_first(field)
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                };
                let number =
                    |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
                let line = number(f.line);
                Some(SymbolHit {
                    name: text(f.name_raw)?,
                    kind: text(f.kind).unwrap_or_default(),
                    path: text(f.path)?,
                    line,
                    column: number(f.column),
                    start_line: doc
                        .get_first(f.start_line)
                        .and_then(|v| v.as_u64())
                        .map_or(line, |n| n as u32),
                    end_line: doc
                        .get_first(f.end_line)
                        .and_then(|v| v.as_u64())
                        .map_or(line, |n| n as u32),
                    container: text(f.container),
                    signature: text(f.signature).unwrap_or_default(),
                    doc: text(f.doc),
                    score,
                })
            })
            .collect()
    }
}

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
        // Only definitions have these fields: no filter on what a document is.
        let mut must: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(should)))];
        if let Some(kind) = kind {
            must.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, kind),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        self.search(&BooleanQuery::new(must), limit, Role::Definitions)
    }

    /// Where `name` is used (calls, implementations), by path and line.
    pub fn references(&self, name: &str, limit: usize) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = TermQuery::new(
            Term::from_field_text(f.ref_name, name),
            IndexRecordOption::Basic,
        );
        // A document per file that names it: `limit` of them hold at least `limit` sites.
        let mut hits = self.search(&query, limit, Role::References);
        hits.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        hits.truncate(limit);
        hits
    }

    /// The definitions of one file, in order.
    pub fn outline(&self, relative: &str) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = TermQuery::new(
            Term::from_field_text(f.path, relative),
            IndexRecordOption::Basic,
        );
        let mut hits = self.search(&query, 100_000, Role::Definitions);
        hits.sort_by_key(|hit| (hit.start_line, hit.line, hit.column));
        hits
    }

    /// Every indexed file with the names it defines and references, for the repository map.
    pub fn files(&self) -> BTreeMap<String, FileRecord> {
        self.read_manifest().files.clone()
    }

    /// The hits of the best `limit` documents of `query` that are `role`'s: from the disk
    /// index, except for the files updated since its last commit, whose hits come from the
    /// in-memory index — scored with the disk index's statistics, so that the two rank
    /// together.
    pub(super) fn search(&self, query: &dyn Query, limit: usize, role: Role) -> Vec<SymbolHit> {
        let limit = limit.max(1);
        let searcher = self.reader.searcher();
        let top = TopDocs::with_limit(limit).order_by_score();
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|recent| !recent.paths().is_empty())
            .map(|recent| {
                let terms = recent
                    .paths()
                    .iter()
                    .flat_map(|path| self.fields.file_terms(path));
                (recent.searcher(), TermSetQuery::new(terms))
            });
        let Some((recent_searcher, outdated)) = recent else {
            let Ok(found) = searcher.search(query, &top) else {
                return Vec::new();
            };
            return self.hits(
                found.into_iter().map(|(score, at)| (score, &searcher, at)),
                role,
                limit,
            );
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
        let mut found: Vec<_> = on_disk
            .into_iter()
            .map(|(score, at)| (score, &searcher, at))
            .chain(
                updated
                    .into_iter()
                    .map(|(score, at)| (score, &recent_searcher, at)),
            )
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0));
        found.truncate(limit);
        self.hits(found, role, limit)
    }

    /// The first `limit` hits of documents found: a definition document is one hit, in the
    /// order found; a reference document one per site it holds, by path and then in the
    /// file's order (so that a limit keeps the same sites whichever order equal scores came
    /// in; a file can name one function a hundred thousand times, and each hit is three
    /// allocations). Documents of the other role make none.
    fn hits<'a>(
        &self,
        found: impl IntoIterator<Item = (f32, &'a tantivy::Searcher, tantivy::DocAddress)>,
        role: Role,
        limit: usize,
    ) -> Vec<SymbolHit> {
        let f = self.fields;
        let text = |doc: &TantivyDocument, field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let path_field = match role {
            Role::Definitions => f.path,
            Role::References => f.ref_path,
        };
        let mut documents: Vec<(f32, String, TantivyDocument)> = found
            .into_iter()
            .filter_map(|(score, searcher, address)| {
                let doc = searcher.doc::<TantivyDocument>(address).ok()?;
                Some((score, text(&doc, path_field)?, doc))
            })
            .collect();
        if role == Role::References {
            documents.sort_by(|a, b| a.1.cmp(&b.1));
        }
        let mut hits = Vec::new();
        for (score, path, doc) in documents {
            if hits.len() >= limit {
                break;
            }
            let numbers = |field| doc.get_all(field).map(|v| v.as_u64().unwrap_or(0) as u32);
            match role {
                Role::Definitions => {
                    let Some(name) = text(&doc, f.name_raw) else {
                        continue;
                    };
                    let line = numbers(f.line).next().unwrap_or(0);
                    hits.push(SymbolHit {
                        name,
                        kind: text(&doc, f.kind).unwrap_or_default(),
                        path,
                        line,
                        column: numbers(f.column).next().unwrap_or(0),
                        start_line: numbers(f.start_line).next().unwrap_or(line),
                        end_line: numbers(f.end_line).next().unwrap_or(line),
                        container: text(&doc, f.container),
                        signature: text(&doc, f.signature).unwrap_or_default(),
                        doc: text(&doc, f.doc),
                        score,
                    });
                }
                Role::References => {
                    let Some(name) = text(&doc, f.ref_name) else {
                        continue;
                    };
                    let kinds = doc.get_all(f.ref_kind).map(|v| v.as_str().unwrap_or(""));
                    let sites = numbers(f.line).zip(numbers(f.column)).zip(kinds);
                    for ((line, column), kind) in sites.take(limit - hits.len()) {
                        hits.push(SymbolHit {
                            name: name.clone(),
                            kind: kind.to_owned(),
                            path: path.clone(),
                            line,
                            column,
                            start_line: line,
                            end_line: line,
                            container: None,
                            signature: String::new(),
                            doc: None,
                            score,
                        });
                    }
                }
            }
        }
        hits
    }
}

/// Which documents a search is after: definitions, or the sites of references.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Definitions,
    References,
}

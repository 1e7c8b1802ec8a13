//! Aligned text tables: a header row and rows of cells, each column as wide as its widest
//! cell, numbers right-aligned so that their digits line up.

/// A table being filled in.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        let mut numeric = vec![true; columns];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
                if !is_number(cell) {
                    numeric[i] = false;
                }
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String], header: bool| {
            let mut text = String::new();
            for i in 0..columns {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = widths[i].saturating_sub(cell.chars().count());
                if i > 0 {
                    text.push_str("  ");
                }
                if numeric[i] && !header {
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                } else {
                    text.push_str(cell);
                    if i + 1 < columns {
                        text.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header, true);
        for row in &self.rows {
            line(row, false);
        }
        out
    }

    /// Prints the table to stdout.
    pub fn print(&self) {
        print!("{}", self.render());
    }
}

fn is_number(cell: &str) -> bool {
    cell == "-" || (!cell.is_empty() && cell.parse::<f64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(&["TOPIC", "PARTITION", "LEADER"]);
        t.row(vec!["a".into(), "0".into(), "1".into()]);
        t.row(vec!["longer".into(), "10".into(), "2".into()]);
        assert_eq!(
            t.render(),
            "TOPIC   PARTITION  LEADER\na               0       1\nlonger         10       2\n"
        );
    }
}

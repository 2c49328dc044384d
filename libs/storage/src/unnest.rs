//! Batches of rows written by one statement: a row type binds its rows as one array per
//! column, and the statement reads them back with `unnest`.
//!
//! A row type is declared once with [`batch_row!`](crate::batch_row): its fields are its
//! columns, in order. A statement's text names each batch it reads by a placeholder,
//! `{name}`, which [`Statement::rows`] turns into `unnest($i, …, $j)` over the next
//! parameters, one per column (and `{name.column}` into one column's array); the caller then
//! binds the batches in the same order with [`BatchRow::bind`]. Parameters are numbered here and nowhere else, so a new column is a
//! new field and a new name in the statement's column list, and the other parameters do not
//! move. Postgres learns each array's type from the bound value, so the text needs no casts.
//!
//! ```ignore
//! oxigram_storage::batch_row! {
//!     struct BodyRow { id: i64, text: String }
//! }
//! static SQL: LazyLock<String> = LazyLock::new(|| {
//!     Statement::new("INSERT INTO message_bodies (id, text) SELECT * FROM {bodies}")
//!         .rows::<BodyRow>("bodies")
//!         .into_sql()
//! });
//! BodyRow::bind(&rows, sqlx::query_as(SQL.as_str())).fetch_all(pool).await?;
//! ```

use sqlx::{Postgres, postgres::PgArguments, query::QueryAs};

/// A query whose parameters are being bound.
pub type Query<'q, O> = QueryAs<'q, Postgres, O, PgArguments>;

/// A row type written in batches, declared with [`batch_row!`](crate::batch_row).
pub trait BatchRow: Sized {
    /// The columns, in field order: the order of the arrays `unnest` reads.
    const COLUMNS: &'static [&'static str];

    /// Binds `rows` as the next `COLUMNS.len()` parameters of `query`, one array per column.
    fn bind<'q, O>(rows: &'q [Self], query: Query<'q, O>) -> Query<'q, O>;
}

/// Declares a struct whose fields are the columns of a batch (see [`BatchRow`]). Attributes
/// (such as `#[derive(sqlx::FromRow)]` for a row read back the same way) pass through.
#[macro_export]
macro_rules! batch_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$field_meta])* $field_vis $field: $ty),*
        }

        impl $crate::unnest::BatchRow for $name {
            const COLUMNS: &'static [&'static str] = &[$(stringify!($field)),*];

            fn bind<'q, O>(
                rows: &'q [Self],
                query: $crate::unnest::Query<'q, O>,
            ) -> $crate::unnest::Query<'q, O> {
                $(let query = query.bind(rows.iter().map(|r| &r.$field).collect::<Vec<_>>());)*
                query
            }
        }
    };
}

/// A statement's text with its batch placeholders numbered (build it once, in a `LazyLock`).
#[derive(Debug, Clone)]
pub struct Statement {
    sql: String,
    next: usize,
}

impl Statement {
    /// A statement whose batches are its first parameters.
    pub fn new(template: &str) -> Self {
        Self::after(template, 0)
    }

    /// A statement whose first `scalars` parameters are its own (`$1` to `$scalars`), bound
    /// before its batches.
    pub fn after(template: &str, scalars: usize) -> Self {
        Self {
            sql: template.to_owned(),
            next: scalars + 1,
        }
    }

    /// Replaces every `{name}` with `unnest(…)` over the next parameters, one per column of
    /// `R`, and every `{name.column}` with that column's parameter (the whole array, as for
    /// `array_position`). Bind the batches in the order they are named here.
    pub fn rows<R: BatchRow>(mut self, name: &str) -> Self {
        let whole = format!("{{{name}}}");
        // A constant text, checked by the tests of every statement built from one.
        debug_assert!(
            self.sql.contains(&whole) || self.sql.contains(&format!("{{{name}.")),
            "the statement reads no batch {whole}"
        );
        let first = self.next;
        let params: Vec<String> = (first..first + R::COLUMNS.len())
            .map(|n| format!("${n}"))
            .collect();
        for (column, param) in R::COLUMNS.iter().zip(&params) {
            self.sql = self.sql.replace(&format!("{{{name}.{column}}}"), param);
        }
        self.sql = self
            .sql
            .replace(&whole, &format!("unnest({})", params.join(", ")));
        self.next += R::COLUMNS.len();
        self
    }

    /// The number of the first parameter after the batches (for parameters appended after
    /// them, such as an outbox's staged rows).
    pub fn next_parameter(&self) -> usize {
        self.next
    }

    pub fn into_sql(self) -> String {
        self.sql
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::batch_row! {
        struct Pair {
            left: i64,
            right: String,
        }
    }

    crate::batch_row! {
        struct Single {
            only: bool,
        }
    }

    #[test]
    fn batches_take_the_parameters_after_the_statements_own() {
        let statement = Statement::after(
            "SELECT * FROM {pairs} AS p(left, right) WHERE $1 AND $2 \
             AND EXISTS (SELECT 1 FROM {singles}) AND EXISTS (SELECT 1 FROM {pairs}) \
             AND cardinality({pairs.right}) > 0",
            2,
        )
        .rows::<Pair>("pairs")
        .rows::<Single>("singles");
        assert_eq!(statement.next_parameter(), 6);
        assert_eq!(
            statement.into_sql(),
            "SELECT * FROM unnest($3, $4) AS p(left, right) WHERE $1 AND $2 \
             AND EXISTS (SELECT 1 FROM unnest($5)) AND EXISTS (SELECT 1 FROM unnest($3, $4)) \
             AND cardinality($4) > 0"
        );
        assert_eq!(Pair::COLUMNS, ["left", "right"]);
    }
}

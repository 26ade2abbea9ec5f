// An ISR page (revalidate: an hour) rendered on first request, never at build: it fetches its data with the tag
// "articles" (so revalidateTag("articles") reaches it) and appends one line per render to RENDER_LOG, which is how
// the test counts the renders of each instance.
import { appendFileSync } from "node:fs";

export const revalidate = 3600;
export const dynamicParams = true;
export function generateStaticParams() {
  return [];
}

export default async function Article({ params }) {
  const { id } = await params;
  const data = await fetch(`${process.env.DATA_URL}/article/${encodeURIComponent(id)}`, {
    next: { tags: ["articles", `article-${id}`], revalidate: 3600 },
  }).then((r) => r.text());
  if (process.env.RENDER_LOG) appendFileSync(process.env.RENDER_LOG, `${process.env.INSTANCE} ${id}\n`);
  return (
    <main>
      <h1>Article {id}</h1>
      <p id="data">{data}</p>
      <p id="rendered">
        rendered by {process.env.INSTANCE} at {Date.now()}
      </p>
    </main>
  );
}
